"""One result protocol over every engine's result, one count record, and the engine chosen before any work."""

import numpy as np
import pytest

import regioncount as rc
from regioncount import Box, Segment, count_record, lower, random_mlp, random_transformer
from regioncount.engines._forward import forward_codes
from regioncount.results import CountRecord, RegionResult


def _results():
    mlp2 = random_mlp(2, (6, 6), seed=1)
    mlp3 = random_mlp(3, (5,), seed=2)
    relu_att = random_transformer(tokens=2, d_model=4, depth=1, d_ff=0, attention="relu", seed=1)
    return {
        "partition": (mlp2, rc.partition_plane(mlp2, Box(-2, 2, 2))),
        "polytopes": (mlp3, rc.partition_space(mlp3, Box(-1, 1, 3))),
        "cells": (relu_att, rc.partition_curved(relu_att, Box(-1, 1, 2))),
        "line": (mlp2, rc.walk_line(mlp2, Segment([-2.0, -1.5], [2.0, 1.0]))),
        "sample": (mlp2, rc.count_sampled(mlp2, Box(-2, 2, 2), grid=64)),
    }


RESULTS = _results()


@pytest.mark.parametrize("name", RESULTS)
def test_every_result_meets_the_protocol(name):
    net, res = RESULTS[name]
    assert isinstance(res, RegionResult)
    assert isinstance(res.regions, int) and res.regions >= 1
    assert isinstance(res.exact, bool) and res.exact is (name != "sample")
    assert res.domain is not None and res.domain.as_dict()
    lin = res.linear_regions()
    if name == "sample":
        assert lin is None and res.region_codes is None and res.witnesses is None
        return
    assert lin is None or 1 <= lin <= res.regions
    codes, W = res.region_codes, res.witnesses
    assert codes.shape[0] == res.regions and W.shape == (res.regions, res.domain.dim)
    # each witness lies in its own region: the forward pass there gives the region's code
    _, got, _ = forward_codes(lower(net), res.domain.to_input(W))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(codes, dtype=np.int32))


def test_the_count_record_holds_the_result_and_prints_the_same_dict():
    net, part = RESULTS["partition"]
    rec = count_record(net, Box(-2, 2, 2))
    assert isinstance(rec, CountRecord) and isinstance(rec.result, rc.Partition)
    assert rec.regions == part.regions and rec.linear_regions == part.linear_regions() and rec.exact
    d = rec.as_dict()
    assert d["regions"] == part.regions and d["domain"] == {"box": {"lo": [-2.0, -2.0], "hi": [2.0, 2.0]}}
    assert {"predicates", "exact_predicates", "assumed_identities", "smallest_area"} <= set(d)
    same = rc.count_regions(net, Box(-2, 2, 2))
    assert {k: v for k, v in same.items() if k != "seconds"} == {k: v for k, v in d.items() if k != "seconds"}


@pytest.mark.parametrize(
    "domain, method, engine",
    [
        (Box(-1, 1, 2), "exact", "plane"),
        (Box(-1, 1, 2), "line", "line"),
        (Box(-1, 1, 2), "sample", "sample"),
        (Box(-1, 1, 1), "exact", "line"),
        (rc.AffineSlice(np.zeros(2), [[1.0], [1.0]], -1, 1), "exact", "line"),
        (rc.AffineSlice(np.zeros(2), np.eye(2), -1, 1), "exact", "plane"),
    ],
)
def test_the_engine_follows_the_method_and_the_dimension(domain, method, engine):
    net = random_mlp(domain.to_input(np.zeros((1, domain.dim))).shape[1], (4,), seed=0)
    assert rc.choose_engine(net, domain, method)[0] == engine


def test_relu_attention_goes_to_the_curved_engine_without_trying_the_plane_engine(monkeypatch):
    net, cells = RESULTS["cells"]
    assert rc.choose_engine(net, Box(-1, 1, 2))[0] == "curved"
    import regioncount.engines._plane as plane

    def refuse(*a, **k):
        raise AssertionError("the plane engine was started")

    monkeypatch.setattr(plane, "partition_plane", refuse)
    rec = count_record(net, Box(-1, 1, 2))
    assert isinstance(rec.result, rc.Cells) and rec.regions == cells.regions
    assert rec.as_dict()["engine"] == "curved" and rec.as_dict()["codes"] == cells.n_codes
    with pytest.raises(rc.RegionCountError, match="tiles"):
        rc.choose_engine(net, Box(-1, 1, 2), tiles=4)


def test_refusals_come_before_any_work():
    soft = random_transformer(tokens=2, d_model=4, depth=1, attention="softmax", seed=0)
    for dom in (Box(-1, 1, 2), Segment([-1.0, -1.0], [1.0, 1.0])):
        with pytest.raises(rc.NotPiecewiseError):
            rc.choose_engine(soft, dom)
    with pytest.raises(rc.RegionCountError, match="out of reach"):
        rc.choose_engine(random_mlp(9, (2,), seed=0), Box(-1, 1, 9))


@pytest.mark.parametrize(
    "case",
    ["segment", "box1", "plane", "tiles", "space3", "space4", "affine3", "curved"],
)
def test_linear_false_leaves_linear_regions_none_for_every_engine(case):
    mlp2, mlp4 = random_mlp(2, (5,), seed=3), random_mlp(4, (3,), seed=3)
    net, dom, extra = {
        "segment": (mlp2, Segment([-1.0, -1.0], [1.0, 0.5]), {}),
        "box1": (random_mlp(1, (5,), seed=3), Box(-1, 1, 1), {}),
        "plane": (mlp2, Box(-1, 1, 2), {}),
        "tiles": (mlp2, Box(-1, 1, 2), {"tiles": 2}),
        "space3": (random_mlp(3, (4,), seed=3), Box(-1, 1, 3), {}),
        "space4": (mlp4, Box(-1, 1, 4), {}),
        "affine3": (mlp4, rc.AffineSlice(np.zeros(4), np.eye(4)[:, :3], -1, 1), {}),
        # hardmax past the first block: the plane engine meets a quadric boundary, the curved engine counts
        "curved": (random_transformer(tokens=2, d_model=4, depth=2, seed=1), Box(-1, 1, 2), {}),
    }[case]
    full = rc.count_regions(net, dom, **extra)
    fast = rc.count_regions(net, dom, linear=False, **extra)
    assert isinstance(full["linear_regions"], int) and fast["linear_regions"] is None
    assert fast["regions"] == full["regions"] and fast["domain"] == full["domain"] == dom.as_dict()
    assert (full.get("engine") == "curved") is (case == "curved") and ("tiles" in full) is (case == "tiles")
