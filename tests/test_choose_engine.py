"""choose_engine decides plane vs curved before any work (issue 20): a hardmax boundary that may be a conic on
the domain is found from the program (exact spans, networks/_spans.py), never by the plane engine mid-run."""

import numpy as np
import pytest

import regioncount as rc
from regioncount._count import choose_engine
from regioncount._errors import CurvedBoundaryError
from regioncount.networks import Affine, Attention, Program, ReLU, lower
from regioncount.networks._spans import Span, bilinear_zero, hardmax_straight

BOX = rc.Box([-1, -1], [1, 1])


def test_spans_are_exact_subspaces():
    s = Span(3, [[1.0, 2.0, 0.0], [2.0, 4.0, 0.0], [0.0, 0.0, 2.0**-60]])
    assert len(s.basis) == 2 and s.support() == {0, 1, 2}
    t = s.map(np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]]))
    assert len(t.basis) == 2 and t.support() == {0, 1}
    # 2^-60 is not rounded away: the quadratic form sees it
    M = np.zeros((3, 3))
    M[2, 2] = 1.0
    assert not bilinear_zero(s, M, s)
    assert bilinear_zero(s, M, Span(3, [[1.0, 0.0, 0.0]]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_first_block_is_plane_and_deeper_blocks_go_curved_up_front(seed):
    d1 = rc.random_transformer(input_dim=2, tokens=3, d_model=6, depth=1, seed=seed)
    d2 = rc.random_transformer(input_dim=2, tokens=3, d_model=6, depth=2, seed=seed)
    assert choose_engine(d1, BOX)[0] == "plane"
    assert choose_engine(d2, BOX)[0] == "curved"
    # the plane engine does meet a conic on the deeper one: the check is not needlessly cautious here
    with pytest.raises(CurvedBoundaryError):
        rc.partition_plane(d2, BOX)


def test_count_regions_never_starts_the_plane_engine_on_a_maybe_curved_network(monkeypatch):
    # no exception-driven hand-over is left: the curved engine runs from the start
    import regioncount.engines._plane as plane

    d2 = rc.random_transformer(input_dim=2, tokens=2, d_model=4, depth=2, seed=1)
    assert choose_engine(d2, BOX)[0] == "curved"
    expected = rc.partition_curved(d2, BOX).regions

    def refuse(*a, **k):
        raise AssertionError("the plane engine ran")

    monkeypatch.setattr(plane, "partition_plane", refuse)
    res = rc.count_regions(d2, BOX, linear=False)
    assert res["engine"] == "curved" and res["regions"] == expected


@pytest.mark.parametrize("layout", ["paper", "compact"])
def test_compiled_transformers_are_proven_straight_and_stay_on_the_plane_engine(layout):
    tf, _ = rc.bound_attaining_transformer(1, 2, 2, 6, layout=layout)
    mx = rc.compile_maxout(rc.random_maxout(2, (3, 3), k=2, seed=5), -1.0, 1.0, layout=layout)
    for net, box in ((tf, rc.Box([-1, -1], [2, 2])), (mx, BOX)):
        assert hardmax_straight(lower(net), np.eye(2))
        assert choose_engine(net, box)[0] == "plane"
        res = rc.count_regions(net, box, linear=False)
        assert "engine" not in res and res["regions"] == rc.partition_plane(net, box).n_regions


def test_a_nonlinearity_before_attention_whose_scores_read_no_moving_coordinate():
    # two tokens, a ReLU before hardmax attention: the tokens' linear parts differ per region, but the
    # queries read only coordinate 2, which no ReLU moves (its row of the first weight is zero): straight
    rng = np.random.default_rng(0)
    W = np.vstack([rng.normal(size=(2, 2)), np.zeros((1, 2))])
    b = np.array([[0.1, -0.2, 1.0], [-0.3, 0.4, 2.0]])  # per token
    Wq = np.zeros((1, 3, 1))
    Wq[0, 2, 0] = 1.0
    Wk = rng.normal(size=(1, 3, 1))
    att = Attention(Wq, Wk, rng.normal(size=(1, 3, 3)), rng.normal(size=(1, 3, 3)))
    net = Program(2, 2, (Affine(W, b), ReLU(), att, ReLU(), Affine(np.ones((1, 3)), np.zeros(1))))
    assert hardmax_straight(net, np.eye(2))
    assert choose_engine(net, BOX)[0] == "plane"
    part = rc.partition_plane(net, BOX)  # no conic met
    cells = rc.partition_curved(net, BOX, certified=False)
    assert part.n_regions == cells.n_codes
    # the same with queries reading a moving coordinate: maybe curved, so the curved engine
    Wq2 = np.zeros((1, 3, 1))
    Wq2[0, 0, 0] = 1.0
    att2 = Attention(Wq2, Wk, att.Wv, att.Wo)
    net2 = Program(2, 2, (Affine(W, b), ReLU(), att2, ReLU(), Affine(np.ones((1, 3)), np.zeros(1))))
    assert not hardmax_straight(net2, np.eye(2))
    assert choose_engine(net2, BOX)[0] == "curved"


def test_a_slice_is_checked_along_its_own_directions():
    # a 3-input first block is straight whatever the slice; a deeper one through a slice goes curved
    d1 = rc.random_transformer(input_dim=3, tokens=3, d_model=6, depth=1, seed=4)
    d2 = rc.random_transformer(input_dim=3, tokens=3, d_model=6, depth=2, seed=4)
    sl = rc.Slice(np.zeros(3), np.array([1.0, 0.0, 0.5]), np.array([0.0, 1.0, -0.5]), [-1, -1], [1, 1])
    assert choose_engine(d1, sl)[0] == "plane"
    assert choose_engine(d2, sl)[0] == "curved"
