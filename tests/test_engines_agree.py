"""Cross-checks between the three engines (DESIGN §3): line vs plane along segments, sample <= exact."""

import numpy as np
import pytest
from _nets import assert_linear_regions_match

import regioncount as rc
from regioncount._domain import Box, Segment
from regioncount.engines._line import walk_line
from regioncount.engines._plane import partition_plane
from regioncount.engines._sample import count_sampled, grid_codes


def _clip(poly: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Parameter interval of the segment a + t (b - a), t in [0, 1], inside a convex CCW polygon."""
    lo, hi = 0.0, 1.0
    d = b - a
    for p, q in zip(poly, np.roll(poly, -1, axis=0)):
        e = q - p
        # inside: cross(e, x - p) >= 0
        c0 = e[0] * (a[1] - p[1]) - e[1] * (a[0] - p[0])
        c1 = e[0] * d[1] - e[1] * d[0]
        if abs(c1) < 1e-15:
            if c0 < 0:
                return 1.0, 0.0
            continue
        t = -c0 / c1
        if c1 > 0:
            lo = max(lo, t)
        else:
            hi = min(hi, t)
    return lo, hi


def _crossed_in_order(part, a, b, min_len=1e-9):
    hits = []
    for r in range(part.n_regions):
        lo, hi = _clip(part.polygon(r), a, b)
        if hi - lo > min_len:
            hits.append((lo, hi, r))
    hits.sort()
    return hits


NETS = {
    "mlp": (lambda: rc.random_mlp(2, [8, 8], seed=11), 1.5),
    "maxout": (lambda: rc.random_maxout(2, [4, 3], k=3, seed=12), 1.5),
    "hardmax-1-block": (lambda: rc.random_transformer(2, tokens=3, d_model=4, depth=1, d_ff=0, seed=13), 2.0),
}


@pytest.mark.parametrize("name", NETS)
def test_line_pieces_are_the_plane_regions_the_segment_crosses(name):
    make, r = NETS[name]
    net = make()
    part = partition_plane(net, Box(-r, r, 2))
    rng = np.random.default_rng(0)
    for _ in range(4):
        a, b = rng.uniform(-r, r, 2), rng.uniform(-r, r, 2)
        line = walk_line(net, Segment(a, b))
        hits = _crossed_in_order(part, a, b)
        assert len(hits) == line.activation_pieces
        np.testing.assert_allclose([h[0] for h in hits[1:]], line.breaks[1:-1], atol=1e-9)
        np.testing.assert_array_equal(part.code_rows(np.array([h[2] for h in hits])), line.codes)


@pytest.mark.parametrize("name", NETS)
def test_sampled_codes_are_exact_codes_and_line_linear_pieces_follow_plane_linear_regions(name):
    make, r = NETS[name]
    net = make()
    box = Box(-r, r, 2)
    part = partition_plane(net, box)
    # sample <= exact, as sets: every code met on a grid is the code of an exact region
    _, gcodes = grid_codes(net, box, 400)
    exact = {c.tobytes() for c in part.codes}
    assert {c.tobytes() for c in np.asarray(gcodes, np.int32)} <= exact
    # linear regions, two engines: along a segment, the line engine's linear pieces are the runs of equal
    # plane linear-region labels over the regions the segment crosses (consecutive regions share an edge)
    labels = part.linear_region_labels()
    assert_linear_regions_match(part, labels)  # a second computation: components of equal-map neighbours
    rng = np.random.default_rng(7)
    for _ in range(3):
        a, b = rng.uniform(-r, r, 2), rng.uniform(-r, r, 2)
        line = walk_line(net, Segment(a, b))
        crossed = [labels[h[2]] for h in _crossed_in_order(part, a, b)]
        assert 1 + sum(x != y for x, y in zip(crossed, crossed[1:])) == line.linear_pieces
    seg = Segment([-r, -r], [r, r])
    assert count_sampled(net, seg, grid=5000).regions <= walk_line(net, seg).distinct_codes


def test_plane_count_equals_fine_grid_on_large_regions():
    net = rc.random_mlp(2, [6, 4], seed=3)
    part = partition_plane(net, Box(-1, 1, 2))
    smallest = part.areas.min() / 4.0
    assert smallest > 1e-4, "pick a network whose regions a 1500^2 grid resolves"
    assert count_sampled(net, Box(-1, 1, 2), grid=1500).regions == part.n_regions
