"""The plane engine's whole-unit test (``_relu._whole_units``): a ReLU unit settled for every parent at once from
the extremes of its coefficients. It must be sound (a unit it calls positive is positive on the whole square for
every parent), it must leave alone every unit whose kink meets the square, and a partition must not depend on it."""

import numpy as np
import pytest

import regioncount.engines._plane._relu as relu
from regioncount import MLP, Box
from regioncount.engines._plane import partition_plane


def _maps(rng, R0: int, D: int, shift: np.ndarray) -> np.ndarray:
    """Maps ``(R0, 3, D)``: small random u coefficients, constants around ``shift`` per unit."""
    Af = np.empty((R0, 3, D))
    Af[:, :2] = rng.normal(scale=0.3, size=(R0, 2, D))
    Af[:, 2] = shift + rng.normal(scale=0.1, size=(R0, D))
    return Af


@pytest.mark.parametrize("R0", [5, 300])  # with and without the probe of the first parents
def test_whole_units_sound_and_only_where_no_kink(R0):
    rng = np.random.default_rng(7)
    D = 60
    shift = np.concatenate([np.full(20, 3.0), np.full(20, -3.0), np.zeros(20)])
    Af = _maps(rng, R0, D, shift)
    err = np.full(D, 1e-15)
    pos, neg = relu._whole_units(Af, err)
    assert not np.any(pos & neg)
    # sound: the value at every corner of the square (the extremes of an affine function there) has the sign
    corners = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], float)
    vals = np.einsum("kc,rcd->rkd", corners, Af[:, :2]) + Af[:, None, 2]  # (R0, 4, D)
    assert np.all(vals[:, :, pos] > 0) and np.all(vals[:, :, neg] < 0)
    # a unit that takes both signs on the square for some parent is never settled
    both = np.any(vals > 0, axis=(0, 1)) & np.any(vals < 0, axis=(0, 1))
    assert both[40:].all() and not np.any((pos | neg)[both])
    # the far-shifted units are settled (their u part reaches at most about 2 on the square)
    assert pos[:20].all() and neg[20:40].all()


def test_whole_units_leaves_units_to_a_large_error_bound():
    rng = np.random.default_rng(3)
    Af = _maps(rng, 200, 10, np.full(10, 3.0))
    assert relu._whole_units(Af, np.full(10, 1e-15))[0].all()
    pos, neg = relu._whole_units(Af, np.full(10, 1.0))  # 3 err alone reaches the constant: nothing is proven
    assert not pos.any() and not neg.any()


def test_partition_the_same_without_the_whole_unit_test(monkeypatch):
    """A net whose second layer has units that never reach their kink on the box and units that do: the same
    vertices, codes and maps, bitwise, with the test and without it (every unit then goes to the per-parent test)."""
    rng = np.random.default_rng(11)
    W1, b1 = rng.normal(size=(24, 2)), rng.normal(scale=0.5, size=24)
    W2 = rng.normal(scale=0.2, size=(16, 24))
    b2 = np.concatenate([np.full(6, 40.0), np.full(6, -40.0), rng.normal(scale=0.5, size=4)])
    W3, b3 = rng.normal(size=(1, 16)), np.zeros(1)
    net = MLP([W1, W2, W3], [b1, b2, b3])
    box = Box(-1.0, 1.0, 2)
    with_test = partition_plane(net, box)
    monkeypatch.setattr(relu, "_whole_units", lambda Af, err: (np.zeros(Af.shape[2], bool),) * 2)
    without = partition_plane(net, box)
    assert with_test.n_regions == without.n_regions > 24
    for a, b in [(with_test.vertices, without.vertices), (with_test.maps, without.maps)]:
        assert np.array_equal(a, b)
    assert np.array_equal(with_test.code_bytes(), without.code_bytes())
