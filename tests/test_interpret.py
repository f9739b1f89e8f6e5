"""The one interpreter of codes (regioncount.networks._interpret): exact maps and constraints from a region's
code, float maps with rigorous bounds, caches keyed by content."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from regioncount import Box, random_maxout, random_mlp
from regioncount.engines import _exact
from regioncount.engines._forward import forward_codes
from regioncount.engines._plane import partition_plane
from regioncount.networks import lower
from regioncount.networks._interpret import ExactMap, ExactProgram, float_maps


def test_exact_weights_follow_an_in_place_change_of_the_array():
    # reproduces the stale cache of the data-pointer keyed copy: the same array, changed in place, must give
    # the new product
    W = np.array([[1.0, 2.0], [3.0, 4.0]])
    b = np.zeros(2)
    M = ExactMap.of_floats(np.eye(3)[:, None, :2])  # (3, 1, 2): x1, x2
    before = _exact.exact_affine(M, W, b)
    W[0, 0] = 5.0
    after = _exact.exact_affine(M, W, b)
    assert before.N[0, 0, 0] * before.s == 1
    assert after.N[0, 0, 0] * after.s == 5


def _fractions(M: ExactMap) -> np.ndarray:
    return M.fractions()


@pytest.mark.parametrize(
    "make", [lambda: random_mlp(2, [5, 4], output_dim=2, seed=3), lambda: random_maxout(2, [4, 3], k=3, seed=1)]
)
def test_exact_maps_match_the_partition_and_constraints_hold_at_witnesses(make):
    net = make()
    program = lower(net)
    part = partition_plane(net, Box(-1, 1, 2))
    ex = ExactProgram.of_domain(program, np.zeros(2), np.eye(2))
    codes = part.codes
    for r in range(0, part.n_regions, max(1, part.n_regions // 12)):
        F = _fractions(ex.output(codes[r]))  # (3, d_out): u1, u2, 1
        assert np.allclose(np.array(F.T, dtype=float), part.maps[r], rtol=1e-12, atol=1e-12)
        C, strict = ex.constraints(codes[r])
        w = part.centroids()[r]
        vals = np.array(
            [
                float(v)
                for v in (C.fractions()[0] * Fraction(w[0]) + C.fractions()[1] * Fraction(w[1]) + C.fractions()[2])
            ]
        )
        assert np.all(vals > 0) or np.all(vals[strict] > 0) and np.all(vals[~strict] >= 0)


@pytest.mark.parametrize("scale", [1.0, 2.0**-60, 2.0**300, 1e-150, 3e-110])
def test_float_maps_are_within_their_bounds_of_the_exact_ones(scale):
    net = random_mlp(2, [6, 6], output_dim=3, seed=5)
    program = lower(net)
    # scale every layer's weights (biases scaled to match), so the maps span many binades
    ops = list(program.ops)
    for i, op in enumerate(ops):
        if type(op).__name__ == "Affine":
            ops[i] = type(op)(op.W * scale, op.b * scale ** (1 + i // 2))
    program = type(program)(program.tokens, program.input_dim, tuple(ops))
    X = np.random.default_rng(0).uniform(-1, 1, (64, 2))
    _, codes, _ = forward_codes(program, X)
    codes = np.asarray(codes)
    A, E, rows = float_maps(program, codes, np.zeros(2), np.eye(2), constraints=True)
    ex = ExactProgram.of_domain(program, np.zeros(2), np.eye(2))
    for r in range(codes.shape[0]):
        F = ex.maps(codes[r]).fractions()  # (3, T, d)
        err = np.abs(
            np.array(
                [
                    [
                        [float(Fraction(A[r, c, t, j]) - F[c, t, j]) for j in range(F.shape[2])]
                        for t in range(F.shape[1])
                    ]
                    for c in range(3)
                ]
            )
        )
        assert np.all(err <= E[r][None]), (r, err.max(), E[r].min())


def _bounds_hold(program, codes, x0, V):
    A, E, _ = float_maps(program, codes, x0, V)
    ex = ExactProgram.of_domain(program, x0, V)
    for r in range(codes.shape[0]):
        F = ex.maps(codes[r]).fractions()  # (c, T, d)
        c, T, d = F.shape
        err = np.array(
            [[[abs(float(Fraction(A[r, a, t, j]) - F[a, t, j])) for j in range(d)] for t in range(T)] for a in range(c)]
        )
        assert np.all(err <= E[r][None]), (r, err.max())
    return E


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_float_hardmax_maps_are_within_their_bounds(seed):
    # random hardmax Transformers (curved scores, several heads, causal or not) at random points
    from regioncount import random_transformer

    net = random_transformer(2, 3, 6, 2, seed=seed)
    program = lower(net)
    X = np.random.default_rng(seed).uniform(-1, 1, (48, 2))
    _, codes, _ = forward_codes(program, X)
    E = _bounds_hold(program, np.asarray(codes), np.zeros(2), np.eye(2))
    assert np.all(np.isfinite(E))  # no tie the floats could not settle at random points


def test_float_hardmax_ties_are_averaged_or_left_to_the_exact_interpreter():
    # a head whose keys tie exactly (a zero key) and one whose keys differ (by the tokens' positions): the float
    # maps average the tied value rows within their bounds, as the exact interpreter does; where every key of
    # a head is the same float map with a nonzero bound (the same token thrice), the tie is left to the exact
    # interpreter: an infinite bound
    from regioncount.networks._ops import Affine, Attention, Program

    rng = np.random.default_rng(3)
    T, d = 3, 2
    Wq = rng.normal(size=(2, d, 1))
    Wk = np.zeros((2, d, 1))
    Wk[1] = rng.normal(size=(d, 1))
    Wv = rng.normal(size=(2, d, 1))
    Wo = rng.normal(size=(2, 1, d))
    positions = Affine(np.eye(d), np.array([[0.0, 0.0], [1.0, -1.0], [-2.0, 0.5]]))
    program = Program(T, 2, (positions, Attention(Wq, Wk, Wv, Wo)))
    codes = np.array([[0, 0, 0, 1, 2, 0], [0, 0, 0, 2, 2, 2]])
    E = _bounds_hold(program, codes, np.array([0.25, -0.5]), np.eye(2) * 0.5)
    assert np.all(np.isfinite(E))
    same = Program(T, 2, (Attention(Wq, Wk, Wv, Wo),))  # no positions: every key of head 1 ties
    E = _bounds_hold(same, codes, np.array([0.25, -0.5]), np.eye(2) * 0.5)
    assert np.all(np.isinf(E))


def test_compiled_transformer_linear_regions_are_decided_by_the_float_filter():
    # the Thm 4.4 construction (1, 4, 2, 6): 3,283 regions, every one its own linear region; with float
    # bounds for attention the merge replays no pair exactly
    from regioncount.results._linear import same_maps
    from regioncount.theory._compile import bound_attaining_transformer

    tf, _ = bound_attaining_transformer(1, 4, 2, 6)
    part = partition_plane(tf, Box(-1, 2, 2))
    assert part.n_regions == 3283
    stats: dict = {}
    pairs = part.adjacency()
    x0, V = part.domain.input_map()
    program = lower(tf)
    keep = same_maps(pairs, program, part.codes, x0, V, stats)
    assert stats["linear_exact"] == 0 and stats["linear_float"] == len(pairs)
    assert not keep.any() and part.linear_regions() == 3283
