"""The certificate's exact checks of a 2D partition of a ReLU / Maxout program (``count --certify``).

Every region's code gives, through the one interpreter of codes (:mod:`regioncount.networks._interpret`),
affine constraint rows that are ``>= 0`` (``> 0`` where strict) exactly on the region; the domain's four
sides are four more rows. The checks claim, for the float64 network as given:

- **constraints**: each polygon stands for an *exact* polygon: the edge from vertex ``m`` to ``m + 1`` lies
  on one row's line (the row nearest the float edge, or a side), and exact vertex ``m`` is where the lines of
  its two edges meet. Every row of the region's code is ``>= 0`` at every exact vertex (so the exact polygon
  lies in the closure of the code's region), an identically zero row is not strict (the region is not
  empty), and each exact vertex lies within ``CERT_VERTEX`` of the diameter of its float vertex;
- **witnesses**: the vertex mean of each float polygon has exactly the region's code (every row's sign there,
  with its strictness, is the code's);
- **neighbour lines**: two regions that share an edge differ exactly in units whose lines carry that edge:
  each differing row is the line of an edge of the region, and several differing rows are one exact line.
  A region lost between two neighbours (a split not made) shows here however thin it is: the neighbours then
  differ in two units whose lines are not the same.

Each sign is decided by a float64 value where its rigorous bound decides (the float maps of the code with
their bounds, the vertex radius from the two lines' bounds; :mod:`regioncount._predicates`) and in rational
arithmetic otherwise. No tolerance decides a sign. The failures name the regions.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .. import _tolerances as tol
from .._predicates import gamma, underflow_slack
from ..networks._interpret import FLOAT, ExactProgram, _Layout, float_maps

#: regions per batch of the float checks
_BATCH = 1024


def _grow(x, n: int):
    return x * (1 + gamma(n + 2)) + underflow_slack(n + 2)


def row_layout(program):
    """Per code position: the first constraint row of its op and the op's kind and group size, so that a
    position's row (for ReLU) or rows (one per piece, for Maxout) can be found: ``(base (C,), k (C,))`` where
    the row of position ``p`` is ``base[p]`` (ReLU, ``k = 0``) or ``base[p] + piece`` (Maxout, ``k`` pieces)."""
    layout = _Layout(program, FLOAT)
    C = layout.code_length
    base = np.zeros(C, np.int64)
    kind = np.zeros(C, np.int64)
    row = 0
    for ins in layout.ins:
        if ins[0] != "leaf" or ins[3] is None:
            continue
        op, sl = ins[1], ins[3]
        n = sl.stop - sl.start
        if op.records == "bits":  # one row per decision
            base[sl] = row + np.arange(n)
            row += n
        else:  # an argmax: one row per choice (the winner's own row is zero)
            choices = op.digit_max(program.tokens) + 1
            base[sl] = row + choices * np.arange(n)
            kind[sl] = choices
            row += n * choices
    return base, kind


def _sides(lo, hi):
    """The domain's four sides as rows ``(4, 3)`` (``>= 0`` inside): exact floats."""
    return np.array([[1.0, 0.0, -lo[0]], [-1.0, 0.0, hi[0]], [0.0, 1.0, -lo[1]], [0.0, -1.0, hi[1]]], dtype=np.float64)


class _Region:
    """A region's exact rows (code rows, then the four sides) as Fractions ``(K, 3)`` and strictness."""

    def __init__(self, ex: ExactProgram, code, sides):
        C, strict = ex.constraints(code)
        F = C.fractions().T  # (m, 3)
        S = np.array([[Fraction(v) for v in r] for r in sides], dtype=object)
        self.rows = np.concatenate([F, S]) if F.size else S
        self.strict = np.concatenate([strict, np.zeros(4, bool)])

    def value(self, j: int, p) -> Fraction:
        r = self.rows[j]
        return r[0] * p[0] + r[1] * p[1] + r[2]

    def vertex(self, a: int, b: int):
        (a0, a1, a2), (b0, b1, b2) = self.rows[a], self.rows[b]
        det = a0 * b1 - a1 * b0
        if det == 0:
            return None
        return ((a1 * b2 - a2 * b1) / det, (a2 * b0 - a0 * b2) / det)

    def polygon(self):
        """The region's exact polygon: the domain clipped by every row (Sutherland-Hodgman in Fractions), with
        the row carrying each edge; ``None`` where it is empty (a zero row that is negative or strict)."""
        sides = self.rows.shape[0] - 4
        (x0, _, _), (x1, _, _) = (-self.rows[sides][2], 0, 0), (self.rows[sides + 1][2], 0, 0)
        y0, y1 = -self.rows[sides + 2][2], self.rows[sides + 3][2]
        # vertices with the row of the edge that leaves each
        poly = [((x0, y0), sides + 2), ((x1, y0), sides + 1), ((x1, y1), sides + 3), ((x0, y1), sides)]
        for j in range(sides):
            a, b, c = self.rows[j]
            if a == 0 and b == 0:
                if c < 0 or (c == 0 and self.strict[j]):
                    return None
                continue
            out = []
            n = len(poly)
            for i in range(n):
                (p, e), (q, _) = poly[i], poly[(i + 1) % n]
                vp, vq = a * p[0] + b * p[1] + c, a * q[0] + b * q[1] + c
                if vp > 0 or (vp == 0 and vq >= 0):
                    out.append((p, e))
                elif vp == 0:  # on the line, the edge leaves the halfplane: the kept boundary runs along row j
                    out.append((p, j))
                if vp > 0 and vq < 0:  # leaving: from the crossing the boundary runs along row j
                    t = vp / (vp - vq)
                    out.append(((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])), j))
                elif vp < 0 and vq > 0:  # entering: from the crossing the boundary continues along row e
                    t = vp / (vp - vq)
                    out.append(((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])), e))
            poly = out
            if len(poly) < 3:
                return None
        return poly

    def compare(self, P: np.ndarray, slack: float) -> str:
        """Check the float polygon ``P (n, 2)`` against the exact polygon: it must exist with positive area and
        each vertex of either must lie within ``slack`` of the other's; '' when it holds, else the reason.
        Sets :attr:`edge_rows`."""
        poly = self.polygon()
        self.edge_rows: set = set()
        if poly is None:
            return "its code's region is empty (exact)"
        pts = [p for p, _ in poly]
        area = sum(
            pts[i][0] * pts[(i + 1) % len(pts)][1] - pts[(i + 1) % len(pts)][0] * pts[i][1] for i in range(len(pts))
        )
        if area <= 0:
            return "its code's region has no area (exact)"
        for i, (p, e) in enumerate(poly):
            q = pts[(i + 1) % len(pts)]
            if p != q:
                self.edge_rows.add(int(e))
        E = np.array([[float(x), float(y)] for x, y in pts])
        d = np.abs(P[:, None, :] - E[None, :, :]).max(axis=2)
        if d.min(axis=1).max() > slack:
            return "a vertex of its polygon lies outside its code's region (exact)"
        if d.min(axis=0).max() > slack:
            return "part of its code's region is missing from its polygon (exact)"
        return ""

    def same_line(self, js) -> bool:
        """Whether rows ``js`` are one exact line (all proportional, either sign)."""
        r0 = self.rows[js[0]]
        for j in js[1:]:
            r = self.rows[j]
            if any(r0[i] * r[k] != r0[k] * r[i] for i in range(3) for k in range(i + 1, 3)):
                return False
        return True


def check_constraints(part, program) -> dict:  # noqa: C901
    """The three exact checks (module docstring) on ``part``: ``{"constraints": ..., "witnesses": ...,
    "neighbour_lines": ...}``, each ``{"passed", "detail"}``."""
    x0, V = part.domain.input_map()
    x0, V = np.asarray(x0, float), np.asarray(V, float)
    lo, hi = part._lo, part._hi
    diam = float(np.hypot(*(hi - lo)))
    sides = _sides(lo, hi)
    R = part.n_regions
    codes = part.codes
    off = part.offsets
    nv = np.diff(off)
    M = int(nv.max()) if R else 0
    ex = ExactProgram.of_domain(program, x0, V, size=64)
    bad_vertex: dict[int, str] = {}
    bad_witness: dict[int, str] = {}
    chosen = np.zeros((R, M), np.int64)  # the row of each edge
    n_exact_regions = 0
    exact_regions: dict[int, _Region] = {}
    edge_rows: dict[int, set] = {}  # regions decided by their exact polygon: the rows carrying its edges
    area_floor = (diam * tol.CERT_RESOLUTION) ** 2
    small = part.areas <= area_floor  # below float64 resolution: decided by the exact polygon alone

    def exact_region(r: int) -> _Region:
        hit = exact_regions.get(r)
        if hit is None:
            hit = exact_regions[r] = _Region(ex, codes[r], sides)
        return hit

    K_code = None
    for b0 in range(0, R, _BATCH):
        b1 = min(R, b0 + _BATCH)
        n = b1 - b0
        _, _, rows = float_maps(program, codes[b0:b1], x0, V, constraints=True)
        Cs = [r[0][:, :, :] for r in rows]
        Cf = np.concatenate(Cs + [np.broadcast_to(sides.T[None], (n, 3, 4))], axis=2)  # (n, 3, K)
        Ef = np.concatenate([r[1] for r in rows] + [np.zeros((n, 4))], axis=1)  # (n, K)
        St = np.concatenate([np.broadcast_to(r[2], r[1].shape) for r in rows] + [np.zeros((n, 4), bool)], axis=1)
        K_code = Cf.shape[2] - 4
        k = np.where(np.arange(M)[None, :] < nv[b0:b1, None], np.arange(M)[None, :], 0)
        valid = np.arange(M)[None, :] < nv[b0:b1, None]
        P = part.vertices[off[b0:b1, None] + k]  # (n, M, 2)
        P1, P2 = P[..., 0:1], P[..., 1:2]
        c0, c1, c2 = Cf[:, None, 0], Cf[:, None, 1], Cf[:, None, 2]  # (n, 1, K)
        v = P1 * c0 + P2 * c1 + c2  # (n, M, K)
        Bf = _grow(
            Ef[:, None] * (np.abs(P1) + np.abs(P2) + 1) + gamma(3) * (np.abs(P1 * c0) + np.abs(P2 * c1) + np.abs(c2)), 6
        )
        G = np.abs(c0) + np.abs(c1)  # (n, 1, K)
        # the row of each edge (vertex m to m + 1): the one whose line is nearest both ends
        nxt = np.where(np.arange(M)[None, :] + 1 < nv[b0:b1, None], np.arange(M)[None, :] + 1, 0)
        vn = np.take_along_axis(v, nxt[:, :, None], axis=1)
        score = np.maximum(np.abs(v), np.abs(vn)) / np.maximum(G, 1e-300)
        score = np.where(G > 0, score, np.inf)
        je = np.argmin(score, axis=2)  # (n, M)
        chosen[b0:b1] = je
        prv = np.where(np.arange(M)[None, :] == 0, nv[b0:b1, None] - 1, np.arange(M)[None, :] - 1)
        ja = np.take_along_axis(je, prv, axis=1)  # the row of the edge into vertex m
        jb = je  # the row of the edge out of vertex m
        # the radius of each exact vertex (the two lines' intersection) around its float vertex
        ri = np.arange(n)[:, None]
        mi = np.arange(M)[None, :]
        a0, a1 = Cf[ri, 0, ja], Cf[ri, 1, ja]
        e0, e1 = Cf[ri, 0, jb], Cf[ri, 1, jb]
        ea, eb = Ef[ri, ja], Ef[ri, jb]
        res = np.maximum(np.abs(v[ri, mi, ja]) + Bf[ri, mi, ja], np.abs(v[ri, mi, jb]) + Bf[ri, mi, jb])
        det = a0 * e1 - a1 * e0
        det_low = np.abs(det) - _grow(
            ea * (np.abs(e0) + np.abs(e1))
            + eb * (np.abs(a0) + np.abs(a1))
            + 2 * ea * eb
            + gamma(2) * (np.abs(a0 * e1) + np.abs(a1 * e0)),
            8,
        )
        adj = np.maximum(np.abs(e1) + np.abs(a1), np.abs(e0) + np.abs(a0)) + ea + eb
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            rho = np.where((det_low > 0) & (ja != jb), _grow(adj * res / det_low, 6), np.inf)
        # every row at every exact vertex: decided by its float value where the bound allows
        margin = Bf + (G + 2 * Ef[:, None]) * rho[:, :, None]
        own = (np.arange(Cf.shape[2])[None, None, :] == ja[:, :, None]) | (
            np.arange(Cf.shape[2])[None, None, :] == jb[:, :, None]
        )
        with np.errstate(invalid="ignore"):
            ok = (v > margin) | own | ((margin == 0) & (v >= 0))
            violated = (v < -margin) & ~own
        far = rho > tol.CERT_VERTEX * diam  # the float vertex is not known to be near its exact one
        undecided = valid & (np.any(~ok & ~violated, axis=2) | far)
        zero_strict = np.any((np.all(Cf == 0, axis=1) & (Ef == 0) & St), axis=1)  # (n,)
        # the exact fallback, region by region: where a sign is undecided or negative at the chosen lines' vertex
        # (the float choice of lines may be wrong in a degenerate corner), and for regions below resolution, the
        # region's exact polygon decides
        go = np.any(undecided | np.any(violated & valid[:, :, None], axis=2), axis=1) | zero_strict | small[b0:b1]
        for r in np.flatnonzero(go).tolist():
            g = b0 + r
            n_exact_regions += 1
            reg = exact_region(g)
            why = reg.compare(P[r, : nv[g]], tol.CERT_VERTEX * diam)
            if why:
                bad_vertex[g] = why
            else:
                edge_rows[g] = reg.edge_rows
        # witnesses: the vertex mean, every row strictly of the code's sign
        X = P.sum(axis=1, where=valid[:, :, None]) / nv[b0:b1, None]
        Xw1, Xw2 = X[:, None, 0:1][:, 0], X[:, None, 1:2][:, 0]  # (n, 1)
        vw = Xw1 * Cf[:, 0] + Xw2 * Cf[:, 1] + Cf[:, 2]  # (n, K)
        Bw = _grow(
            Ef * (np.abs(Xw1) + np.abs(Xw2) + 1)
            + gamma(3) * (np.abs(Xw1 * Cf[:, 0]) + np.abs(Xw2 * Cf[:, 1]) + np.abs(Cf[:, 2])),
            6,
        )
        sure = (vw > Bw) | (~St & (Bw == 0) & (vw >= 0)) | small[b0:b1, None]
        wrong = (vw < -Bw) & ~small[b0:b1, None]
        for r in np.flatnonzero(np.any(wrong, axis=1)).tolist():
            bad_witness[b0 + r] = "its witness point has another code"
        for r in np.flatnonzero(np.any(~sure & ~wrong, axis=1)).tolist():
            g = b0 + r
            if g in bad_witness:
                continue
            reg = exact_region(g)
            Xe = (Fraction(X[r, 0]), Fraction(X[r, 1]))
            for j in np.flatnonzero(~sure[r]).tolist():
                val = reg.value(j, Xe)
                if val < 0 or (val == 0 and reg.strict[j]):
                    bad_witness[g] = "its witness point has another code (exact)"
                    break
    # neighbours: they differ exactly in units whose lines carry their shared edge
    bad_pair: dict[tuple, str] = {}
    E = part.adjacency()
    base, kk = row_layout(program)
    K_code = 0 if K_code is None else K_code
    if E.size:
        a, b = E[:, 0], E[:, 1]
        diff = codes[a] != codes[b]
        single = diff.sum(axis=1) == 1
        p = np.argmax(diff, axis=1)
        fine = single.copy()
        exact_path = np.zeros(R, bool)
        exact_path[list(edge_rows)] = True
        for A, B in ((a, b), (b, a)):
            rows_A = np.where(kk[p] > 0, base[p] + codes[B, p], base[p])
            on = np.any((chosen[A] == rows_A[:, None]) & (np.arange(M)[None, :] < nv[A, None]), axis=1)
            fine &= on & ~exact_path[A]
        fine |= diff.sum(axis=1) == 0  # same code: the neighbours check reports it
        for i, j in E[~fine].tolist():
            D = np.flatnonzero(codes[i] != codes[j])
            for A, B in ((i, j), (j, i)):
                rows_A = np.where(kk[D] > 0, base[D] + codes[B][D], base[D]).tolist()
                reg = exact_region(A)
                if A in edge_rows:
                    carry = [e for e in edge_rows[A] if e < K_code]
                else:
                    carry = [int(e) for e in np.unique(chosen[A, : nv[A]]) if e < K_code]
                if not reg.same_line(rows_A) or not any(reg.same_line([rows_A[0], e]) for e in carry):
                    bad_pair[(i, j)] = (
                        f"regions {i} and {j} are neighbours but differ in {len(D)} units whose lines are not "
                        "their shared edge's line (a region between them is missing)"
                    )
                    break
    out = {}
    out["constraints"] = _report(
        bad_vertex,
        R,
        f"every row of every region's code is >= 0 at its exact vertices ({n_exact_regions} regions decided in "
        "exact arithmetic)",
        "regions whose polygon leaves its code's region",
    )
    out["witnesses"] = _report(
        bad_witness, R, "every region's vertex mean has exactly its code", "regions whose witness has another code"
    )
    out["neighbour_lines"] = _report(
        dict(bad_pair),
        len(E),
        f"{len(E)} neighbour pairs differ exactly in the units of their shared edge's line",
        "neighbour pairs with a missing region between them",
        names=list(bad_pair),
    )
    return out


def _report(bad: dict, total: int, ok_text: str, bad_text: str, names=None) -> dict:
    if not bad:
        return {"passed": True, "detail": ok_text, "regions": []}
    keys = names if names is not None else sorted(bad)
    first_reason = bad[keys[0]]
    shown = ", ".join(str(k) for k in keys[:8]) + (" ..." if len(keys) > 8 else "")
    return {
        "passed": False,
        "detail": f"{len(keys)} {bad_text}: {shown} (first: {first_reason})",
        "regions": [list(k) if isinstance(k, tuple) else int(k) for k in keys],
    }


__all__ = ["check_constraints", "row_layout"]
