import numpy as np
import pytest
from _nets import lines_mlp

import regioncount as rc
from regioncount._domain import Box, Segment, Slice
from regioncount._errors import DomainError, MemoryCapError
from regioncount.engines._sample import _unique_weighted, chao1, count_sampled, grid_codes


@pytest.mark.parametrize("n", [1, 3, 6, 9])
def test_lines_in_general_position_give_closed_form(n):
    net = lines_mlp(n, seed=n)
    res = count_sampled(net, Box(-1, 1, 2), grid=1500)
    assert res.regions == 1 + n + n * (n - 1) // 2
    assert res.samples == 1500**2


def test_counts_do_not_depend_on_chunking():
    net = rc.random_mlp(2, [10, 10], seed=3)
    a = count_sampled(net, Box(-2, 2, 2), grid=300, chunk=1024)
    b = count_sampled(net, Box(-2, 2, 2), grid=300, chunk=1 << 17)
    assert (a.regions, a.f1, a.f2) == (b.regions, b.f1, b.f2)
    # the distinct count equals an independent count of the full codes
    _, codes = grid_codes(net, Box(-2, 2, 2), 300)
    assert a.regions == len({c.tobytes() for c in codes})


def test_random_points_are_seeded_and_chunk_invariant():
    net = rc.random_maxout(2, [5, 5], k=3, seed=1)
    a = count_sampled(net, Box(-1, 1, 2), samples=50_000, seed=7, chunk=4096)
    b = count_sampled(net, Box(-1, 1, 2), samples=50_000, seed=7, chunk=50_000)
    c = count_sampled(net, Box(-1, 1, 2), samples=50_000, seed=8)
    assert (a.regions, a.f1, a.f2) == (b.regions, b.f1, b.f2)
    assert (a.regions, a.f1) != (c.regions, c.f1)


def test_abundance_statistics_match_direct_computation():
    net = rc.random_mlp(2, [12, 12], seed=5)
    res = count_sampled(net, Box(-3, 3, 2), samples=20_000, seed=1)
    _, codes = grid_codes(net, Box(-3, 3, 2), 2)  # warm the same program
    rng = np.random.default_rng(1)
    U = rng.uniform([-3, -3], [3, 3], size=(20_000, 2))
    from regioncount.engines._forward import forward_codes

    _, c, _ = forward_codes(net.lower(), U)
    _, counts = np.unique(np.asarray(c), axis=0, return_counts=True)
    f1, f2 = int((counts == 1).sum()), int((counts == 2).sum())
    assert (res.regions, res.f1, res.f2) == (counts.size, f1, f2)
    assert res.chao1 == pytest.approx(chao1(counts.size, f1, f2))
    assert res.coverage == pytest.approx(1 - f1 / 20_000)


def test_chao1_formulas():
    assert chao1(10, 4, 2) == 10 + 16 / 4
    assert chao1(10, 4, 0) == 10 + 4 * 3 / 2


def test_unique_weighted_separates_second_lane():
    ka = np.array([5, 5, 5, 1, 1], np.uint64)
    kb = np.array([2, 1, 2, 9, 9], np.uint64)
    a, b, w = _unique_weighted(ka, kb, np.array([1, 2, 3, 4, 5]))
    assert list(zip(a.tolist(), b.tolist(), w.tolist())) == [(1, 9, 9), (5, 1, 2), (5, 2, 4)]


def test_slice_and_segment_domains():
    net3 = rc.random_mlp(3, [8], seed=2)
    W = net3.weights[0]
    net2 = rc.MLP((W[:, :2], net3.weights[1]), (net3.biases[0] + W[:, 2] * 0.5, net3.biases[1]))
    s = count_sampled(net3, Slice([0, 0, 0.5], [1, 0, 0], [0, 1, 0], (-1, -1), (1, 1)), grid=400)
    b = count_sampled(net2, Box(-1, 1, 2), grid=400)
    assert s.regions == b.regions
    seg = count_sampled(net3, Segment([-1, -1, -1], [1, 1, 1]), grid=20_000)
    assert 1 <= seg.regions <= 9


def test_sampled_is_a_lower_bound_that_grows_with_samples():
    net = rc.random_mlp(2, [16, 16], seed=0)
    counts = [count_sampled(net, Box(-2, 2, 2), grid=g).regions for g in (50, 200, 800)]
    assert counts[0] <= counts[1] <= counts[2]
    assert counts[0] < counts[2]


def test_bad_inputs():
    net = rc.random_mlp(2, [4], seed=0)
    with pytest.raises(MemoryCapError, match="cap"):
        count_sampled(net, Box(-1, 1, 2), samples=10**9, memory_cap=2**30)
    with pytest.raises(DomainError):
        Box(1, -1, 2)
    with pytest.raises(DomainError, match="inputs"):
        count_sampled(net, Box(-1, 1, 3), grid=10)
    with pytest.raises(ValueError, match="exactly one"):
        count_sampled(net, Box(-1, 1, 2), grid=10, samples=10)


@pytest.mark.parametrize("attention", ["hardmax", "relu"])
def test_prefix_counts_equal_truncated_networks(attention):
    from regioncount.engines._sample import count_sampled_prefixes
    from regioncount.networks import depth_code_ends, truncate

    net = rc.random_transformer(2, tokens=3, d_model=6, depth=3, attention=attention, scale_by_T=True, seed=4)
    box = Box(-1, 1, 2)
    together = count_sampled_prefixes(net, box, depth_code_ends(net), grid=120)
    for D, res in enumerate(together, start=1):
        alone = count_sampled(truncate(net, D), box, grid=120)
        assert (res.regions, res.f1, res.f2) == (alone.regions, alone.f1, alone.f2)
    assert together[0].regions < together[-1].regions


def _lane_collision_rate(delta, bits: int) -> float:
    """Fraction of all odd multiplier vectors mod 2^bits with sum_i delta_i m_i = 0 mod 2^bits."""
    odd = np.arange(1, 2**bits, 2, dtype=np.int64)
    grids = np.meshgrid(*([odd] * len(delta)), indexing="ij")
    total = sum(int(d) * g for d, g in zip(delta, grids))
    return float(np.mean(total % 2**bits == 0))


@pytest.mark.parametrize(
    "delta, s",
    [((1, -1), 1), ((1, 1, -1), 1), ((2, -2), 2), ((1, -2, 1), 2), ((2, 1, -1), 2), ((3, -3), 2), ((-2, 2, 2), 2)],
)
def test_hash_lane_collision_bound_holds_and_bits_need_s_1(delta, s):
    # The hash is linear, so codes c, c' collide in a lane iff sum (c - c')_i m_i = 0 (mod 2^64); the low
    # `bits` bits of that sum depend only on m mod 2^bits, and odd m mod 2^64 are uniform on the odd residues,
    # so the exhaustive rate mod 2^bits is the rate the docstring bounds by 2^(s - bits), |delta_i| < 2^s.
    from regioncount.engines._forward import hash_codes, hash_multipliers

    bits = 6
    rate = _lane_collision_rate(delta, bits)
    assert rate <= 2.0 ** (s - bits)
    # linearity, on the real 64-bit hash: key(c) - key(c') = key(c - c') mod 2^64 in both lanes
    c = np.array([[2, 1, 0][: len(delta)]]) + np.maximum(-np.array([delta]), 0)
    c2 = c + np.array([delta])
    m = hash_multipliers(len(delta))
    k1, k2 = np.asarray(hash_codes(c, m)), np.asarray(hash_codes(c2, m))
    want = (np.array(delta, dtype=np.int64).astype(np.uint64)[None, :] * m).sum(axis=1)
    np.testing.assert_array_equal(k2[0] - k1[0], want)


def test_hash_bit_collision_rate_is_twice_the_old_bound():
    # a ReLU-bit difference (1, -1) collides iff m_1 = m_2: probability 2^(1 - bits), i.e. s = 1, not s = 0
    assert _lane_collision_rate((1, -1), 6) == 2.0 ** (1 - 6)
