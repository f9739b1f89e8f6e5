"""The certificate of a partition into polytopes (dimension k >= 3, ``count --certify`` on a 3D box or slice).

Checks (each ``{"passed", "detail"}``, and ``"regions"`` where it names them):

- ``vertices`` (ReLU and Maxout programs, **exact**): every float vertex of every polytope stands for an exact
  point within ``CERT_VERTEX`` of the diameter where every row of its region's code (the one interpreter of
  codes, :mod:`regioncount.networks._interpret`) and every side of the domain is ``>= 0``: rows whose float
  value clears its rigorous bound are decided in float64; the others (the planes the vertex lies on) are
  solved for in rational arithmetic: the exact point where they vanish (or, at a degenerate vertex, a basis
  of them) must satisfy them all;
- ``witnesses`` (ReLU and Maxout programs, **exact**): the vertex mean of each polytope has exactly its code;
- ``volumes``: the volumes add up to the domain's (a float check, ``CERT_AREA_RTOL``);
- ``neighbours``: no two adjacent polytopes carry the same code.

A polytope merged into a neighbour fails ``vertices`` (its far vertices leave its code's region), named.
Not built for k >= 3: the neighbour-line check of the 2D certificate (so a lost region thinner than
``CERT_VERTEX`` of the diameter is caught only where a vertex shows it).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np

from .. import _tolerances as tol
from .._predicates import gamma, underflow_slack
from ..networks import walk_widths
from ..networks._interpret import ExactProgram, float_maps
from ._space._predicates import exact_value, float_values, solve_exact

_BATCH = 512


def _grow(x, n: int):
    return x * (1 + gamma(n + 2)) + underflow_slack(n + 2)


def _affine_constraints(program) -> bool:
    """Whether every op of ``program`` has affine constraint rows in both interpretations (the op protocol's
    ``exact`` and ``float`` rows): then the certificate's exact checks run."""
    from ..networks._protocol import SUPPORT

    return all(SUPPORT["certificate"][op.key] is None for op, _, _ in walk_widths(program))


def certify_polytopes(poly, program) -> dict:
    """Run every applicable check on ``poly`` (a :class:`~regioncount.results.Polytopes` of ``program``)."""
    checks: dict = {}
    box = float(np.prod(poly._hi - poly._lo))
    total = float(np.sum(poly.volumes))
    checks["volumes"] = {
        "passed": bool(abs(total - box) <= tol.CERT_AREA_RTOL * box and np.all(poly.volumes > 0)),
        "detail": f"volumes sum to {total!r} of {box!r}",
    }
    E = poly.adjacency()
    cb = poly.code_bytes()
    same = int(np.sum(np.all(cb[E[:, 0]] == cb[E[:, 1]], axis=1))) if E.size else 0
    checks["neighbours"] = {"passed": same == 0, "detail": f"{len(E)} adjacent pairs, {same} of them share a code"}
    if _affine_constraints(program):
        checks.update(_exact_checks(poly, program))
    else:
        checks["vertices"] = {"passed": None, "detail": "not checked: attention's constraints are not affine"}
    return {"passed": all(c["passed"] is not False for c in checks.values()), "checks": checks}


def _exact_checks(poly, program) -> dict:  # noqa: C901
    k = poly.k
    x0, V = poly.domain.input_map()
    x0, V = np.asarray(x0, float), np.asarray(V, float)
    lo, hi = poly._lo, poly._hi
    diam = float(np.linalg.norm(hi - lo))
    rho = tol.CERT_VERTEX * diam
    # the domain's 2k sides as rows (coefficients of v, then the constant): exact floats
    sides = np.zeros((2 * k, k + 1))
    for i in range(k):
        sides[2 * i, i], sides[2 * i, k] = 1.0, -lo[i]
        sides[2 * i + 1, i], sides[2 * i + 1, k] = -1.0, hi[i]
    R = poly.n_regions
    codes = poly.codes
    off = poly.offsets
    ex = ExactProgram.of_domain(program, x0, V, size=64)
    bad_vertex: dict[int, str] = {}
    bad_witness: dict[int, str] = {}
    n_exact = 0
    exact_rows: dict[int, tuple] = {}

    def rows_of(r: int):
        hit = exact_rows.get(r)
        if hit is None:
            C, strict = ex.constraints(codes[r])
            F = C.fractions().T  # (m, k + 1)
            S = np.array([[Fraction(v) for v in row] for row in sides], dtype=object)
            hit = exact_rows[r] = (
                np.concatenate([F, S]) if F.size else S,
                np.concatenate([strict, np.zeros(2 * k, bool)]),
            )
        return hit

    W = poly.witness_points()
    for b0 in range(0, R, _BATCH):
        b1 = min(R, b0 + _BATCH)
        n = b1 - b0
        _, _, rows = float_maps(program, codes[b0:b1], x0, V, constraints=True)
        Cf = np.concatenate([r[0] for r in rows] + [np.broadcast_to(sides.T[None], (n, k + 1, 2 * k))], axis=2)
        Ef = np.concatenate([r[1] for r in rows] + [np.zeros((n, 2 * k))], axis=1)
        St = np.concatenate([np.broadcast_to(r[2], r[1].shape) for r in rows] + [np.zeros((n, 2 * k), bool)], axis=1)
        for r in range(n):
            g = b0 + r
            P = poly.vertices[off[g] : off[g + 1]]  # (nv, k)
            C = Cf[r]  # (k + 1, K)
            vT, roundT = float_values(np.broadcast_to(P, (C.shape[1],) + P.shape), C[:k].T, C[k])
            v = vT.T  # (nv, K)
            Bf = _grow(Ef[r] * (np.abs(P).sum(axis=1, keepdims=True) + 1) + roundT.T, 2 * k + 4)
            margin = Bf + (np.abs(C[:k]).sum(axis=0) + k * Ef[r]) * rho
            ok = v > margin
            if np.any(np.all(C == 0, axis=0) & (Ef[r] == 0) & St[r]):
                bad_vertex[g] = "its code's region is empty (a strict zero row)"
                continue
            if not ok.all():
                n_exact += 1
                Re, _ = rows_of(g)
                for m in np.flatnonzero(~ok.all(axis=1)).tolist():
                    U = np.flatnonzero(~ok[m]).tolist()
                    Pm = [Fraction(x) for x in P[m]]
                    found = False
                    for basis in itertools.combinations(U, k):
                        X = solve_exact([Re[j] for j in basis], k)
                        if X is None or max(abs(a - b) for a, b in zip(X, Pm, strict=True)) > Fraction(rho):
                            continue
                        if all(exact_value(Re[j], X) >= 0 for j in U):
                            found = True
                            break
                        if len(U) > k + 6:
                            break  # a vertex on very many planes: the first bases decide or it fails
                    if not found:
                        bad_vertex[g] = f"vertex {m} has no exact point near it inside its code's region"
                        break
            # the witness: every row strictly of the code's sign
            w = W[g]
            vwT, rwT = float_values(np.broadcast_to(w, (C.shape[1], 1, k)), C[:k].T, C[k])
            vw = vwT[:, 0]
            Bw = _grow(Ef[r] * (np.abs(w).sum() + 1) + rwT[:, 0], 2 * k + 4)
            if np.any(vw < -Bw):
                bad_witness[g] = "its witness point has another code"
            elif not np.all((vw > Bw) | (~St[r] & (Bw == 0) & (vw >= 0))):
                Re, Se = rows_of(g)
                we = [Fraction(x) for x in w]
                for j in np.flatnonzero(~(vw > Bw)).tolist():
                    val = exact_value(Re[j], we)
                    if val < 0 or (val == 0 and Se[j]):
                        bad_witness[g] = "its witness point has another code (exact)"
                        break

    def report(bad, ok_text, bad_text):
        if not bad:
            return {"passed": True, "detail": ok_text, "regions": []}
        keys = sorted(bad)
        shown = ", ".join(map(str, keys[:8])) + (" ..." if len(keys) > 8 else "")
        return {"passed": False, "detail": f"{len(keys)} {bad_text}: {shown} (first: {bad[keys[0]]})", "regions": keys}

    return {
        "vertices": report(
            bad_vertex,
            f"every vertex has an exact point near it inside its code's region ({n_exact} polytopes decided in "
            "exact arithmetic)",
            "polytopes with a vertex outside their code's region",
        ),
        "witnesses": report(
            bad_witness, "every polytope's vertex mean has exactly its code", "polytopes whose witness has another code"
        ),
    }


__all__ = ["certify_polytopes"]
