"""A corpus of exact counts across engines and architectures, for checking that a refactor changes nothing.

Each case builds a seeded network, runs one engine on one domain through the public API, and records the
region count, the linear-region count, the ``exact`` flag and a SHA-256 of the sorted code bytes (the codes,
bitwise). ``python scripts/corpus.py --out A.json`` on one commit and ``--out B.json`` on another, then
``python scripts/corpus.py --compare A.json B.json`` lists every case whose record differs (exit 1 if any).

``--quick`` runs about a tenth of the cases (every engine still met); ``--only SUBSTR`` the cases whose id
contains SUBSTR. Cases that raise record the error's class and first line, so a refusal that changes shows.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import traceback

import numpy as np

import regioncount as rc


def _sha_rows(rows: np.ndarray) -> str:
    """SHA-256 of the distinct rows of ``rows`` (uint8 or int), sorted, so the digest is order-free."""
    a = np.ascontiguousarray(np.asarray(rows))
    if a.ndim == 1:
        a = a[:, None]
    if a.shape[0] == 0:
        return "empty"
    u = np.unique(a, axis=0)
    return hashlib.sha256(u.astype(np.int64).tobytes() + str(u.shape).encode()).hexdigest()[:16]


def _record(result) -> dict:
    """What is compared: counts and codes of a result object (Partition, Polytopes, Cells, LinePieces)."""
    if isinstance(result, rc.Partition):
        return {
            "regions": int(result.n_regions),
            "linear_regions": int(result.linear_regions()),
            "codes": _sha_rows(result.codes),
            "exact": bool(result.stats["assumed"] == 0),
        }
    if isinstance(result, rc.Polytopes):
        return {
            "regions": int(result.n_regions),
            "linear_regions": int(result.linear_regions()),
            "codes": _sha_rows(result.codes),
        }
    if isinstance(result, rc.Cells):
        lin = result.linear_regions()
        return {
            "regions": int(result.regions),
            "codes_distinct": int(result.n_codes),
            "linear_regions": None if lin is None else int(lin),
            "codes": _sha_rows(result.cell_codes),
            "exact": bool(result.exact),
        }
    if isinstance(result, rc.LinePieces):
        return {
            "regions": int(result.activation_pieces),
            "linear_regions": int(result.linear_pieces),
            "codes": hashlib.sha256(np.ascontiguousarray(result.codes).astype(np.int64).tobytes()).hexdigest()[:16],
            "exact": bool(result.exact),
        }
    if isinstance(result, dict):  # count_regions' record: the counts only
        keys = ("regions", "linear_regions", "exact", "codes", "tiles")
        return {k: result[k] for k in keys if k in result}
    raise TypeError(type(result))


def _cases():
    """(id, thunk) pairs; each thunk returns a result object or a count record."""
    cases = []

    def add(name, fn):
        cases.append((name, fn))

    # 2D MLPs: plane engine, several inits, widths, depths and boxes
    for seed in range(6):
        for widths in [(8,), (16, 16), (12, 12, 12), (32, 32), (10, 10, 10, 10), (40,)]:
            for init in ("torch", "normal"):
                net = rc.random_mlp(2, widths, seed=seed, init=init)
                box = rc.Box([-2, -2], [2, 2]) if init == "torch" else rc.Box([-1, -3], [3, 1])
                add(f"plane/mlp{widths}/{init}/s{seed}", lambda n=net, b=box: rc.partition_plane(n, b))
    # maxout in the plane
    for seed in range(4):
        for widths, k in [((6,), 2), ((5, 5), 3), ((4, 4, 4), 2), ((8,), 4)]:
            net = rc.random_maxout(2, widths, k=k, seed=seed)
            add(f"plane/maxout{widths}k{k}/s{seed}", lambda n=net: rc.partition_plane(n, rc.Box([-2, -2], [2, 2])))
    # a 2D slice of a higher-dimensional MLP
    for seed in range(4):
        net = rc.random_mlp(4, (16, 16), seed=seed)
        rng = np.random.default_rng(seed)
        x0, v1, v2 = rng.normal(size=(3, 4))
        add(
            f"plane/slice4d/s{seed}",
            lambda n=net, x=x0, a=v1, b=v2: rc.partition_plane(n, rc.Slice(x, a, b, [-1, -1], [1, 1])),
        )
    # constructions
    for widths in [(6, 3), (6, 6, 3)]:
        net = rc.product_relu(widths, 2)
        add(f"plane/product_relu{widths}", lambda n=net: rc.partition_plane(n, rc.Box([-1, -1], [2, 2])))
    for widths, k in [((4, 2), 3), ((4, 4, 2), 3), ((4, 2), 2)]:
        net = rc.product_maxout(widths, 2, k)
        add(f"plane/product_maxout{widths}k{k}", lambda n=net: rc.partition_plane(n, rc.Box([-1, -1], [2, 2])))
    # hardmax transformers: first-block (straight) and deeper (curved); compiled maxout
    for seed in range(6):
        for depth in (1, 2, 3):
            net = rc.random_transformer(input_dim=2, tokens=3, d_model=6, depth=depth, seed=seed)
            add(
                f"exact/transformer_d{depth}/s{seed}",
                lambda n=net: rc.count_regions(n, rc.Box([-1, -1], [1, 1]), method="exact"),
            )
            if depth >= 2:
                add(
                    f"curved/transformer_d{depth}/s{seed}",
                    lambda n=net: rc.partition_curved(n, rc.Box([-1, -1], [1, 1])),
                )
    for seed in range(3):
        net = rc.random_transformer(input_dim=2, tokens=2, d_model=6, depth=1, attention="relu", seed=seed)
        add(f"curved/relu_attention_d1/s{seed}", lambda n=net: rc.partition_curved(n, rc.Box([-1, -1], [1, 1])))
    for layout in ("paper", "compact"):
        tf, _info = rc.bound_attaining_transformer(1, 2, 2, 6, layout=layout)
        add(f"plane/compiled_(1,2,2,6)/{layout}", lambda n=tf: rc.partition_plane(n, rc.Box([-1, -1], [2, 2])))
        mx = rc.random_maxout(2, (3, 3), k=2, seed=5)
        tf2 = rc.compile_maxout(mx, -1.0, 1.0, layout=layout)
        add(f"plane/compile_random/{layout}", lambda n=tf2: rc.partition_plane(n, rc.Box([-1, -1], [1, 1])))
    # line engine on every architecture
    for seed in range(6):
        rng = np.random.default_rng(100 + seed)
        a, b = rng.uniform(-2, 2, size=(2, 2))
        nets = {
            "mlp": rc.random_mlp(2, (16, 16, 16), seed=seed),
            "maxout": rc.random_maxout(2, (6, 6), k=3, seed=seed),
            "hardmax": rc.random_transformer(input_dim=2, tokens=3, d_model=6, depth=2, seed=seed),
            "relu_att": rc.random_transformer(input_dim=2, tokens=3, d_model=6, depth=2, attention="relu", seed=seed),
        }
        for name, net in nets.items():
            add(f"line/{name}/s{seed}", lambda n=net, a=a, b=b: rc.walk_line(n, rc.Segment(a, b)))
        net3 = rc.random_mlp(5, (20, 20), seed=seed)
        a5, b5 = rng.uniform(-1, 1, size=(2, 5))
        add(f"line/mlp5d/s{seed}", lambda n=net3, a=a5, b=b5: rc.walk_line(n, rc.Segment(a, b)))
    # space engine: 3D and 4D boxes, slices
    for seed in range(5):
        for q, widths in [(3, (8, 8)), (3, (12,)), (4, (8, 6)), (3, (6, 6, 6))]:
            net = rc.random_mlp(q, widths, seed=seed)
            add(f"space/mlp{q}d{widths}/s{seed}", lambda n=net, q=q: rc.partition_space(n, rc.Box([-1] * q, [1] * q)))
        mx = rc.random_maxout(3, (4, 4), k=2, seed=seed)
        add(f"space/maxout3d/s{seed}", lambda n=mx: rc.partition_space(n, rc.Box([-1] * 3, [1] * 3)))
    for seed in range(3):
        net = rc.random_mlp(5, (10, 10), seed=seed)
        rng = np.random.default_rng(seed)
        U = np.linalg.qr(rng.normal(size=(5, 3)))[0]
        add(
            f"space/affine_slice5d/s{seed}",
            lambda n=net, U=U: rc.partition_space(n, rc.AffineSlice(np.zeros(5), U, [-1] * 3, [1] * 3)),
        )
    tf3 = rc.random_transformer(input_dim=3, tokens=3, d_model=6, depth=1, seed=1)
    add("space/transformer_d1", lambda n=tf3: rc.partition_space(n, rc.Box([-1] * 3, [1] * 3)))
    # tiles
    for seed in range(3):
        net = rc.random_mlp(2, (16, 16), seed=seed)
        for tiles in (4, (2, 3)):
            add(
                f"tiles/mlp/s{seed}/{tiles}",
                lambda n=net, t=tiles: rc.count_tiled(n, rc.Box([-2, -2], [2, 2]), t).as_dict(),
            )
    # count_regions' records (what the CLI prints)
    for seed in range(3):
        net = rc.random_mlp(2, (16, 16), seed=seed)
        add(f"count/exact2d/s{seed}", lambda n=net: rc.count_regions(n, rc.Box([-2, -2], [2, 2])))
        add(f"count/line/s{seed}", lambda n=net: rc.count_regions(n, rc.Box([-2, -2], [2, 2]), method="line"))
        net3 = rc.random_mlp(3, (8, 8), seed=seed)
        add(f"count/exact3d/s{seed}", lambda n=net3: rc.count_regions(n, rc.Box([-1] * 3, [1] * 3)))
    # shared data files, where present
    from pathlib import Path

    data = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    for name in ("torch_mlp_w16_d3_s0.npz", "torch_mlp_w100_d5_s0.npz"):
        if (data / name).exists():
            add(
                f"plane/shared/{name}",
                lambda p=data / name: rc.partition_plane(rc.load_network(p), rc.Box([-2, -2], [2, 2])),
            )
    return cases


def run(quick: bool = False, only: str | None = None) -> dict:
    out = {}
    cases = _cases()
    if quick:
        cases = cases[::10]
    if only:
        cases = [c for c in cases if only in c[0]]
    for i, (name, fn) in enumerate(cases):
        t0 = time.perf_counter()
        try:
            rec = _record(fn())
        except Exception as e:  # noqa: BLE001 (a refusal that changes must show)
            rec = {"error": type(e).__name__, "message": str(e).splitlines()[0] if str(e) else ""}
            if not isinstance(e, rc.RegionCountError):
                rec["trace"] = traceback.format_exc().splitlines()[-3:]
        out[name] = rec
        print(f"[{i + 1}/{len(cases)}] {name}: {rec} ({time.perf_counter() - t0:.2f} s)", file=sys.stderr)
    return out


def compare(a: dict, b: dict) -> list[str]:
    diffs = []
    for k in sorted(set(a) | set(b)):
        ra, rb = a.get(k), b.get(k)
        if ra != rb:
            diffs.append(f"{k}: {ra} -> {rb}")
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the records here (JSON)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"))
    args = ap.parse_args()
    if args.compare:
        a, b = (json.load(open(p)) for p in args.compare)
        diffs = compare(a, b)
        print("\n".join(diffs) if diffs else f"{len(a)} cases, all equal")
        return 1 if diffs else 0
    rec = run(args.quick, args.only)
    text = json.dumps(rec, indent=1, sort_keys=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text)
    print(f"{len(rec)} cases", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
