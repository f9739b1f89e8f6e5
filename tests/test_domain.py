"""Domains are immutable: read-only copies of the caller's arrays."""

import json

import numpy as np
import pytest

from regioncount import AffineSlice, Box, DomainError, Segment, Slice, domain_from_dict


def test_box_copies_and_freezes_its_bounds():
    lo, hi = np.array([-1.0, -2.0]), np.array([1.0, 2.0])
    box = Box(lo, hi)
    lo[0], hi[0] = 5.0, 6.0  # the caller's arrays change; the box does not
    np.testing.assert_array_equal(box.lo, [-1.0, -2.0])
    np.testing.assert_array_equal(box.hi, [1.0, 2.0])
    with pytest.raises(ValueError, match="read-only"):
        box.lo[0] = 0.0
    with pytest.raises(ValueError, match="read-only"):
        box.param_hi[1] = 0.0


def test_slice_does_not_alias_the_callers_arrays():
    x0, v1, v2 = np.zeros(3), np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])
    s = Slice(x0, v1, v2, lo=(-1, -1), hi=(1, 1))
    x0[:] = 7.0
    v1[:] = v2
    np.testing.assert_array_equal(s.to_input([[1.0, 1.0]]), [[1.0, 1.0, 0.0]])
    for name in ("x0", "v1", "v2", "lo", "hi"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(s, name)[0] = 1.0


def test_segment_is_frozen_and_still_validates():
    a = np.array([0.0, 0.0])
    seg = Segment(a, [1.0, 1.0])
    a[0] = 3.0
    np.testing.assert_array_equal(seg.a, [0.0, 0.0])
    with pytest.raises(ValueError, match="read-only"):
        seg.b[0] = 0.0
    with pytest.raises(DomainError):
        Segment([1.0, 1.0], [1.0, 1.0])
    with pytest.raises(DomainError):
        Box([0.0, 1.0], [1.0, 1.0])


def test_affine_slice_is_frozen_too():
    x0, U = np.zeros(4), np.eye(4)[:, :3]
    s = AffineSlice(x0, U, -1, 1)
    x0[:], U[:] = 5.0, 0.0
    np.testing.assert_array_equal(s.x0, np.zeros(4))
    np.testing.assert_array_equal(s.U, np.eye(4)[:, :3])
    for name in ("x0", "U", "lo", "hi"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(s, name).flat[0] = 1.0


# bounds that are not short decimals, so a round trip that loses bits would show
_ODD = [0.1 + 2.0**-50, -1 / 3]
DOMAINS = [
    Box([-1.0, -1 / 3, 0.1], [1.0, 2.0**-40, 7 / 3]),
    Slice([0.1, 0.2, 1 / 3], [1.0, 0.0, 1e-300], [0.0, 1 / 7, 0.0], (-1, -2), (1 / 3, 2)),
    AffineSlice(
        [0.0, 0.1, 0.2, 1 / 3], np.arange(12.0).reshape(4, 3) ** 1.5 + np.eye(4)[:, :3], [-1, -2, -3], _ODD + [9]
    ),
    AffineSlice([0.5, 0.25], [[1.0], [1 / 3]], -2.0, 1.0),
    Segment([0.0, 1 / 3, -2.0], [1e-17, 2.0, 5.0]),
]


@pytest.mark.parametrize("dom", DOMAINS, ids=lambda d: type(d).__name__)
def test_every_domain_survives_a_json_round_trip_bit_for_bit(dom):
    d = dom.as_dict()
    text = json.dumps(d)
    back = domain_from_dict(json.loads(text))
    assert type(back) is type(dom) and back.dim == dom.dim
    assert type(dom).from_dict(json.loads(text)).as_dict() == d
    x0, V = dom.input_map()
    y0, W = back.input_map()
    assert x0.tobytes() == y0.tobytes() and V.tobytes() == W.tobytes()
    np.testing.assert_array_equal(back.param_lo, dom.param_lo)
    np.testing.assert_array_equal(back.param_hi, dom.param_hi)


def test_affine_slice_records_origin_and_directions_not_a_box():
    s = AffineSlice([0.0, 0.0, 0.0, 0.5], np.eye(4)[:, :3], -1, 1)
    d = s.as_dict()["affine_slice"]
    assert d["origin"] == [0.0, 0.0, 0.0, 0.5]
    assert d["dirs"] == [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]
    assert d["lo"] == [-1.0] * 3 and d["hi"] == [1.0] * 3


@pytest.mark.parametrize(
    "bad",
    [{}, {"box": {"lo": [0]}, "slice": {}}, {"torus": {}}, {"box": [0, 1]}, {"segment": {"from": [0.0]}}],
)
def test_a_malformed_record_is_a_domain_error(bad):
    with pytest.raises(DomainError):
        domain_from_dict(bad)
