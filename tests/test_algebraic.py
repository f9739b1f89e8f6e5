"""Certified algebraic predicates (engines/_algebraic.py): algebraic reals, roots in intervals, fibres of
curves of any degree over an algebraic x, each against closed forms."""

import math

import numpy as np
import pytest

pytest.importorskip("flint", reason="the certified predicates need python-flint (extra 'exact')")

from flint import fmpq, fmpq_poly  # noqa: E402

from regioncount.engines import _algebraic as al  # noqa: E402


def test_algebraic_reals_order_and_equality():
    s2 = al.roots_in(fmpq_poly([-2, 0, 1]), al.rational(0))  # sqrt 2
    assert len(s2) == 1 and abs(float(s2[0]) - math.sqrt(2)) < 1e-15
    # the same number from another polynomial: (x^2 - 2)(x - 1)^2 has the key of sqrt 2
    again = al.roots_in(fmpq_poly([-2, 0, 1]) * fmpq_poly([-1, 1]) ** 2, al.rational(1.2))
    assert [r.key for r in again] == [s2[0].key] and al.cmp(again[0], s2[0]) == 0
    # two numbers 1e-30 apart are ordered exactly
    tiny = fmpq(1, 10**30)
    a = al.roots_in(fmpq_poly([-2, 0, 1]) * 1, al.rational(0))[0]
    b = al.roots_in(fmpq_poly([-(2 + tiny), 0, 1]), al.rational(0))[0]
    assert al.cmp(a, b) == -1 and al.cmp(b, a) == 1
    q = al.between(a, b)
    assert al.cmp(a, al.rational(q)) == -1 == al.cmp(al.rational(q), b)
    assert al.sign_at(fmpq_poly([-3, 0, 1]), a) == -1 and al.sign_at(fmpq_poly([-4, 0, 2]), a) == 0


def test_conic_predicates():
    circle = al.canonical([1, 0, 1, 0, 0, -fmpq(1, 4)])
    assert [float(r) for r in al.y_roots_at(circle, fmpq(0))] == [-0.5, 0.5]
    assert al.y_roots_at(circle, fmpq(1)) == []
    line = al.canonical([0, 0, 0, 1, -1, 0])  # x - y
    res = al.resultant_y(circle, line)  # meets where 2 x^2 = 1/4
    xs = al.roots_in(res)
    assert [round(float(x), 12) for x in xs] == [round(-math.sqrt(1 / 8), 12), round(math.sqrt(1 / 8), 12)]
    assert al.canonical([2, 0, 2, 0, 0, -fmpq(1, 2)]) == circle


def test_fibres_of_any_degree_over_an_algebraic_x():
    a = al.roots_in(fmpq_poly([-2, 0, 1]), al.rational(0))[0]  # x = sqrt 2
    P = fmpq_poly
    y2_x = al.Fibre([P([0, -1]), P([0]), P([1])], a)  # y^2 = x: +- 2^(1/4)
    y4_x2 = al.Fibre([P([0, 0, -1]), P([0]), P([0]), P([0]), P([1])], a)  # y^4 = x^2: the same two
    cubic = al.Fibre([P([-1]), P([0, -1]), P([0]), P([1])], a)  # y^3 - x y - 1
    ref = sorted(r.real for r in np.roots([1, 0, -math.sqrt(2), -1]) if abs(r.imag) < 1e-9)
    assert len(cubic.intervals) == len(ref) == 1
    lo, hi = cubic.intervals[0]
    assert float(lo) < ref[0] < float(hi)
    assert al.fibre_cmp(y2_x, 0, y4_x2, 0) == 0 and al.fibre_cmp(y2_x, 1, y4_x2, 1) == 0
    assert al.fibre_cmp(y2_x, 0, y4_x2, 1) == -1
    assert al.fibre_cmp(y2_x, 1, cubic, 0) == -1  # 2^(1/4) = 1.189 < 1.450
    # a double root counts once: (y - x)^2 (y + 1)
    dbl = al.Fibre([P([0, 0, 1]), P([0, -2, 1]), P([1, -2]), P([1])], a)
    assert len(dbl.intervals) == 2
    sq = al.Fibre([P([0, 0, -1]), P([0]), P([1])], a)  # y^2 = x^2: +- sqrt 2
    assert al.fibre_cmp(dbl, 1, sq, 1) == 0 and al.fibre_cmp(dbl, 0, sq, 0) == 1
