"""Edge subdivision (Berzins 2023), our own float32 NumPy implementation, as the comparison baseline.

Berzins, "Polyhedral complex extraction from ReLU networks using edge subdivision", ICML 2023. The method
keeps the polyhedral complex that the neurons cut the input box into as its vertices and edges only, each
vertex with its sign vector (one entry per hyperplane: the box's 2q faces, then every neuron; 0 where the
vertex lies on it). Neurons are taken layer by layer and one at a time:

1. the neuron's preactivation is evaluated at every vertex (within a layer, every neuron is affine on each
   cell of the earlier layers' complex, so a new vertex's preactivations of the whole layer are the linear
   interpolation of its edge's endpoints', and the next layer's come from ReLU of them);
2. every edge whose endpoints have opposite signs is split at the interpolated zero: a new vertex, whose sign
   vector is the edge's (the endpoints' nonzero entries) with a 0 at the neuron;
3. every 2-face crossed by the neuron gets one new edge between its two new vertices. A 2-face is named by
   its sign vector: an edge with zero set Z (q - 1 hyperplanes) bounds the 2-faces obtained by dropping one
   z in Z and giving it the sign + or - (only + for a face of the box), so the new vertices are grouped by
   these face keys, and each group must have exactly two members.

Regions are counted at the end as distinct cells: a generic vertex lies on q hyperplanes and touches the
2^q cells obtained by signing its zeros (box faces only +), so the cells are the distinct keys over all
vertices. In 2D the Euler characteristic gives a second count, E - V + 1 (the box is contractible). Sign
vectors are hashed to 64-bit keys (a random integer weight per hyperplane, wrapping sums), so a key is one
integer; two different faces share one with probability about 2^-64 per pair.

This is a float32 method: signs are those of float32 preactivations, so on hard nets (near-parallel lines,
tiny regions) it can differ from an exact count; the result says what it could not make consistent
(``face_anomalies``: face groups without exactly two new vertices; ``ties``: preactivations exactly 0 at a
vertex, taken as +; ``vertex_anomalies``: vertices not on exactly q hyperplanes). It runs on the CPU here;
Berzins published a GPU implementation, which this does not reproduce. Memory: the sign vectors take one
byte per vertex and hyperplane (V x (2q + neurons)), the current layer's preactivations four bytes per vertex
and unit: about 50 MB for the 46,122-region 2->100x5 net, but about 2 GB for a 10^6-region 2->1800 net.

    python benchmarks/edge_subdivision.py --check          # against regioncount's exact counts, small nets
    python benchmarks/edge_subdivision.py MODEL.npz --box -2 2
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

import numpy as np


class _Rows:
    """A growable array (rows appended in amortised O(1) by doubling its capacity)."""

    def __init__(self, rows: np.ndarray, capacity: int = 0):
        self.a = np.zeros((max(len(rows), capacity, 16), *rows.shape[1:]), rows.dtype)
        self.a[: len(rows)] = rows
        self.n = len(rows)

    @property
    def v(self) -> np.ndarray:
        return self.a[: self.n]

    def extend(self, rows: np.ndarray) -> None:
        need = self.n + len(rows)
        if need > len(self.a):
            grown = np.zeros((max(need, 2 * len(self.a)), *self.a.shape[1:]), self.a.dtype)
            grown[: self.n] = self.a[: self.n]
            self.a = grown
        self.a[self.n : need] = rows
        self.n = need


def _box_complex(lo: np.ndarray, hi: np.ndarray, n_cols: int):
    """The box [lo, hi] as a complex: its 2^q corners (positions, zero sets, sign rows) and q 2^(q-1) edges.
    Hyperplane 2i is x_i = lo_i, 2i + 1 is x_i = hi_i; the box's inside is their + side."""
    q = len(lo)
    bits = np.array(list(itertools.product((0, 1), repeat=q)), dtype=np.int64)  # corner c has bits[c]
    X = np.where(bits == 1, hi, lo).astype(np.float32)
    Z = (2 * np.arange(q) + bits).astype(np.int32)
    S = np.ones((len(bits), n_cols), np.int8)
    S[:, 2 * q :] = 0  # neurons not taken yet
    np.put_along_axis(S, Z.astype(np.int64), 0, axis=1)
    index = {tuple(b): i for i, b in enumerate(bits.tolist())}
    edges = []
    for i, b in enumerate(bits.tolist()):
        for k in range(q):
            if b[k] == 0:
                other = list(b)
                other[k] = 1
                edges.append((i, index[tuple(other)]))
    return X, Z, S, np.array(edges, np.int64)


def edge_subdivision(weights, biases, lo, hi, *, seed: int = 0) -> dict:
    """Count the activation regions of the ReLU MLP with hidden layers ``x -> relu(W x + b)`` (``weights[l]``
    of shape (out, in); the output layer is not passed: it makes no regions) in the box [lo, hi] by edge
    subdivision in float32. Returns the counts and the complex's size:

    ``regions`` (distinct cells), ``regions_euler`` (2D only: E - V + 1), ``vertices``, ``edges``, and the
    consistency figures ``face_anomalies``, ``vertex_anomalies``, ``ties`` (all 0 on a clean run)."""
    lo = np.asarray(lo, np.float64)
    hi = np.asarray(hi, np.float64)
    q = len(lo)
    if q < 2:
        raise ValueError("edge subdivision needs an input dimension of at least 2")
    Ws = [np.asarray(W, np.float32) for W in weights]
    bs = [np.asarray(b, np.float32) for b in biases]
    n_cols = 2 * q + sum(len(b) for b in bs)
    rng = np.random.default_rng(seed)
    key_w = rng.integers(-(2**62), 2**62, n_cols, dtype=np.int64)  # one hash weight per hyperplane
    is_box = np.arange(n_cols) < 2 * q

    X0, Z0, S0, E0 = _box_complex(lo, hi, n_cols)
    X, Z, S, E = _Rows(X0), _Rows(Z0), _Rows(S0), _Rows(E0)
    h = _Rows(S0.astype(np.int64) @ key_w)  # a vertex's key: sum of weight * sign over its sign vector
    face_anomalies = ties = 0
    col = 2 * q
    P = None
    with np.errstate(over="ignore"):
        for W, b in zip(Ws, bs, strict=True):
            pre = (X.v if P is None else np.maximum(P.v, np.float32(0))) @ W.T + b
            P = _Rows(pre.astype(np.float32), capacity=len(X.a))
            for j in range(len(b)):
                n_old = X.n
                p = P.v[:, j]
                ties += int(np.count_nonzero(p == 0))
                s = np.where(p < 0, np.int8(-1), np.int8(1))
                S.a[:n_old, col] = s
                h.a[:n_old] += s.astype(np.int64) * key_w[col]
                edges = E.v
                split = np.flatnonzero(s[edges[:, 0]] != s[edges[:, 1]])
                if len(split) == 0:
                    col += 1
                    continue
                a, c = edges[split, 0], edges[split, 1]
                pa, pc = p[a], p[c]
                t = (pa / (pa - pc))[:, None]
                Xn = X.v[a] + t * (X.v[c] - X.v[a])
                Pn = P.v[a] + t * (P.v[c] - P.v[a])
                Pn[:, j] = 0
                Sa, Sc = S.v[a, : col + 1], S.v[c, : col + 1]
                Sn = np.zeros((len(split), n_cols), np.int8)
                Sn[:, : col + 1] = np.where(Sa != 0, Sa, Sc)
                Sn[:, col] = 0
                # The edge's zero set: the hyperplanes both endpoints lie on (q - 1 of them).
                Za, Zc = Z.v[a], Z.v[c]
                common = (Za[:, :, None] == Zc[:, None, :]).any(axis=2)
                ok = common.sum(axis=1) == q - 1
                if not ok.all():  # a degenerate edge (float32 ties); keep its first q - 1 zeros
                    face_anomalies += int(np.count_nonzero(~ok))
                    order = np.argsort(~common, axis=1, kind="stable")
                    Ze = np.take_along_axis(Za, order, axis=1)[:, : q - 1]
                else:
                    Ze = Za[common].reshape(len(split), q - 1)
                # The new vertex's key: the edge's sign vector (a's, with a's zeros filled from c) and 0 at col.
                fill = np.take_along_axis(Sc, Za.astype(np.int64), axis=1).astype(np.int64)
                hn = h.v[a] + (fill * key_w[Za]).sum(axis=1) - s[a].astype(np.int64) * key_w[col]
                new = np.arange(n_old, n_old + len(split))
                # Face keys: drop one zero z of the edge, sign it + or - (a box face: + only).
                keys = np.concatenate([hn[:, None] + key_w[Ze], hn[:, None] - key_w[Ze]], axis=1)
                valid = np.concatenate([np.ones_like(Ze, bool), ~is_box[Ze]], axis=1)
                owner = np.broadcast_to(new[:, None], keys.shape)[valid]
                keys = keys[valid]
                order = np.argsort(keys, kind="stable")
                ks, os_ = keys[order], owner[order]
                starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
                sizes = np.diff(np.r_[starts, len(ks)])
                face_anomalies += int(np.count_nonzero(sizes != 2))
                pairs = starts[sizes == 2]
                face_edges = np.stack([os_[pairs], os_[pairs + 1]], axis=1)
                # Split the crossed edges (a, c) into (a, new) and (new, c); add the faces' new edges.
                E.a[split, 1] = new
                E.extend(np.concatenate([np.stack([new, c], axis=1), face_edges]))
                X.extend(Xn)
                P.extend(Pn)
                S.extend(Sn)
                h.extend(hn)
                Z.extend(np.concatenate([Ze, np.full((len(split), 1), col, np.int32)], axis=1).astype(np.int32))
                col += 1
        # Cells: every vertex touches the 2^q cells obtained by signing its q zeros (box faces: + only).
        Zv = Z.v.astype(np.int64)
        signs = np.array(list(itertools.product((1, -1), repeat=q)), dtype=np.int64)  # (2^q, q)
        cell = h.v[:, None] + (signs[None, :, :] * key_w[Zv][:, None, :]).sum(axis=2)
        inside = ~((signs[None, :, :] < 0) & is_box[Zv][:, None, :]).any(axis=2)
        regions = int(len(np.unique(cell[inside])))
    zeros_per_vertex = np.count_nonzero(S.v == 0, axis=1) - (n_cols - col)  # columns not taken count as 0
    out = {
        "regions": regions,
        "vertices": int(X.n),
        "edges": int(E.n),
        "face_anomalies": face_anomalies,
        "vertex_anomalies": int(np.count_nonzero(zeros_per_vertex != q)),
        "ties": ties,
    }
    if q == 2:
        out["regions_euler"] = int(E.n - X.n + 1)
    return out


def hidden_layers(path: str):
    """The hidden layers (weights, biases) of a torch ``Sequential`` state dict saved as ``.npz``
    (``0.weight``, ``0.bias``, ``2.weight``, ...): every Linear but the last."""
    d = np.load(path)
    names = sorted({k.rsplit(".", 1)[0] for k in d.files}, key=lambda s: int(s) if s.isdigit() else s)
    layers = [(d[n + ".weight"], d[n + ".bias"]) for n in names]
    return [W for W, _ in layers[:-1]], [b for _, b in layers[:-1]]


def timed(weights, biases, lo, hi) -> dict:
    """``edge_subdivision`` with its wall and CPU seconds (``time.process_time``) added."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = edge_subdivision(weights, biases, lo, hi)
    out.update(wall=time.perf_counter() - t0, cpu=time.process_time() - c0)
    return out


#: Small torch-init nets for ``--check``: (input dim, hidden widths, seed, box half-width).
CHECK_NETS = [
    (2, (8,), 0, 2.0),
    (2, (16, 16, 16), 0, 2.0),
    (2, (32, 32), 1, 2.0),
    (3, (10, 10), 0, 2.0),
    (3, (8, 8, 8, 8), 0, 2.0),
    (4, (6, 6), 0, 2.0),
    (4, (10, 10), 0, 2.0),
]


def check() -> int:
    """Edge subdivision against regioncount's exact count (``partition_plane`` / ``partition_space``) on
    ``CHECK_NETS``; prints one row each and returns the number of rows that differ."""
    import regioncount as rc

    differ = 0
    for q, widths, seed, r in CHECK_NETS:
        net = rc.random_mlp(q, widths, seed=seed, init="torch")
        es = timed(net.weights[:-1], net.biases[:-1], [-r] * q, [r] * q)
        box = rc.Box([-r] * q, [r] * q)
        exact = (rc.partition_plane if q == 2 else rc.partition_space)(net, box).n_regions
        same = es["regions"] == exact and es.get("regions_euler", exact) == exact
        differ += not same
        print(
            f"{q}->{'x'.join(map(str, widths))} seed {seed} [-{r}, {r}]^{q}: edge subdivision {es['regions']}"
            + (f" (Euler {es['regions_euler']})" if q == 2 else "")
            + f", exact {exact}, {'equal' if same else 'DIFFERENT'}; anomalies {es['face_anomalies']}"
            f"/{es['vertex_anomalies']}/{es['ties']}, {es['cpu']:.3f} CPU s"
        )
    return differ


def main() -> int:
    ap = argparse.ArgumentParser(description="count the linear regions of a ReLU MLP by edge subdivision")
    ap.add_argument("model", nargs="?", help="a torch Sequential state dict saved as .npz")
    ap.add_argument("--box", nargs=2, type=float, default=(-2.0, 2.0), metavar=("LO", "HI"))
    ap.add_argument("--check", action="store_true", help="compare with regioncount's exact count on small nets")
    args = ap.parse_args()
    if args.check:
        return 1 if check() else 0
    if not args.model:
        ap.error("give a model file or --check")
    weights, biases = hidden_layers(args.model)
    q = weights[0].shape[1]
    print(timed(weights, biases, [args.box[0]] * q, [args.box[1]] * q))
    return 0


if __name__ == "__main__":
    sys.exit(main())
