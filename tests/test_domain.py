"""Domains are immutable: read-only copies of the caller's arrays."""

import numpy as np
import pytest

from regioncount import Box, DomainError, Segment, Slice


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
