"""The short-axis helpers of engines/_rows.py against the NumPy expressions they stand for, bit for bit."""

import numpy as np
import pytest

from regioncount.engines._rows import last_max, last_sum, slot_sum, take_lines, take_rows


@pytest.mark.parametrize("shape", [(7, 5, 2), (0, 4, 2), (6, 9), (5,)])
def test_take_rows_is_indexing_by_rows(shape):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape)
    rows = rng.integers(0, max(1, shape[0]), 11) if shape[0] else np.zeros(0, np.int64)
    got = take_rows(a, rows)
    assert got.flags.c_contiguous and np.array_equal(got, a[rows])
    if len(shape) > 1 and shape[0]:
        for m in (1, 3, shape[1], shape[1] + 2):
            got = take_rows(a, rows, m)
            assert got.flags.c_contiguous and np.array_equal(got, a[rows, :m])


def test_take_lines_is_indexing_either_side_of_a_slice():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((6, 3, 40))
    rows, cols = rng.integers(0, 6, 50), rng.integers(0, 40, 50)
    assert np.array_equal(take_lines(A, rows, cols), A[rows, :, cols])
    strided = A[:, :, ::2]  # not contiguous: the indexing itself
    assert np.array_equal(take_lines(strided, rows, cols // 2), strided[rows, :, cols // 2])
    one = A[:1]  # one row: the lines taken as rows of the transposed maps
    assert np.array_equal(take_lines(one, np.zeros(50, np.int64), cols), one[np.zeros(50, np.int64), :, cols])
    empty = np.zeros(0, np.int64)
    assert take_lines(A, empty, empty).shape == (0, 3) and take_lines(one, empty, empty).shape == (0, 3)


def test_the_reductions_are_numpys_bit_for_bit():
    rng = np.random.default_rng(2)
    for k in (1, 2, 3, 5, 7, 8, 20):
        X = rng.standard_normal((9, k)) * 10.0 ** rng.integers(-8, 8, (9, k))
        assert np.array_equal(last_max(X), X.max(axis=-1))
        assert np.array_equal(last_sum(X), X.sum(axis=-1))
    V = rng.standard_normal((5, 6, 2))
    assert np.array_equal(slot_sum(V), V.sum(axis=1))


def test_nonzero2_is_numpys_nonzero():
    from regioncount.engines._rows import nonzero2

    rng = np.random.default_rng(3)
    for a in (
        rng.random((40, 7)) < 0.3,
        (rng.random((9, 12)) < 0.5)[:, ::2],  # not contiguous
        np.zeros((0, 5), bool),
        rng.random(30) < 0.5,
        rng.random((3, 4, 5)) < 0.5,
    ):
        got, want = nonzero2(a), np.nonzero(a)
        assert len(got) == len(want) and all(np.array_equal(g, w) and g.dtype == w.dtype for g, w in zip(got, want))


def test_where_rows_is_indexing_by_a_mask():
    from regioncount.engines._rows import where_rows

    rng = np.random.default_rng(4)
    n = 57
    arrays = (rng.integers(0, 9, n), rng.standard_normal((n, 3)), rng.integers(0, 2**60, (n, 2)).astype(np.uint64))
    for mask in (rng.random(n) < 0.5, np.zeros(n, bool), np.ones(n, bool)):
        got = where_rows(mask, *arrays)
        assert len(got) == len(arrays)
        for g, a in zip(got, arrays, strict=True):
            assert g.dtype == a.dtype and np.array_equal(g, a[mask])
