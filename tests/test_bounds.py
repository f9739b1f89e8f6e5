"""Bounds (DESIGN §4): known values, identities between formulas, brute force, monotonicity, lower <= upper."""

import itertools
from math import comb, prod

import pytest

from regioncount.theory._bounds import (
    BOUNDS,
    maxout_lower,
    maxout_upper_mrz,
    maxout_upper_serra,
    relu_lower_montufar,
    relu_lower_serra,
    relu_upper_serra,
    transformer_maxout_lower,
    zaslavsky,
)

# (m, T, q, D) -> N, the known values listed in DESIGN §4 (Gu, Yang, Zhou 2026, Thm 4.4)
THM44_KNOWN = {(1, 2, 1, 6): 9, (2, 2, 1, 6): 25, (1, 2, 2, 6): 16, (4, 3, 2, 6): 48_841, (2, 3, 3, 6): 29_125}


@pytest.mark.parametrize("args,value", sorted(THM44_KNOWN.items()))
def test_thm44_known_values(args, value):
    assert transformer_maxout_lower(*args) == value


def test_design_construction_values():
    # DESIGN §5: product constructions on [-1, 2]^2
    assert relu_lower_serra((6, 3), 2) == 112
    assert relu_lower_serra((6, 6, 3), 2) == 1792
    assert maxout_lower((4, 2), 2, 3) == 225
    assert maxout_lower((4, 4, 2), 2, 3) == 5625


def test_every_bound_returns_an_exact_int():
    big = relu_upper_serra((40,) * 12, 5)
    assert type(big) is int and big > 2**53  # beyond float precision, still exact
    assert type(transformer_maxout_lower(8, 5, 3, 30)) is int
    for spec in BOUNDS.values():
        v = spec(n=5, n0=2, widths=(6, 6, 4), k=3, m=2, T=3, q=2, D=6)
        assert type(v) is int and v >= 1


def test_zaslavsky_matches_general_position_lines_in_the_plane():
    # n lines in general position in R^2: 1 + n + n(n-1)/2 regions
    for n in range(0, 12):
        assert zaslavsky(n, 2) == 1 + n + n * (n - 1) // 2
    for n in range(1, 8):
        assert zaslavsky(n, n) == 2**n  # n0 >= n: every sign pattern


def _serra_upper_brute(widths, n0):
    """Serra et al. 2018 Thm 1 by enumerating every (j_1..j_L) and checking the constraint directly."""
    total = 0
    for js in itertools.product(*(range(n + 1) for n in widths)):
        ok = all(js[l] <= min([n0, widths[l]] + [widths[i] - js[i] for i in range(l)]) for l in range(len(widths)))
        if ok:
            total += prod(comb(n, j) for n, j in zip(widths, js, strict=True))
    return total


@pytest.mark.parametrize("n0", [1, 2, 3, 4])
def test_relu_upper_serra_equals_brute_force(n0):
    for widths in [(1,), (3,), (2, 2), (3, 1, 4), (4, 3, 2), (5, 2, 5), (2, 6, 3, 3)]:
        assert relu_upper_serra(widths, n0) == _serra_upper_brute(widths, n0), widths


def test_relu_upper_serra_exact_for_n0_1():
    # DESIGN §4: exact maximum prod (n_l + 1) for n0 = 1 and every n_l >= 3
    for widths in [(3,), (3, 4), (5, 3, 7), (3, 3, 3, 3)]:
        assert relu_upper_serra(widths, 1) == prod(n + 1 for n in widths)


def test_single_layer_bounds_reduce_to_zaslavsky():
    for n, n0 in itertools.product(range(1, 9), range(1, 5)):
        assert relu_upper_serra((n,), n0) == zaslavsky(n, n0)
        assert relu_lower_montufar((n,), n0) == zaslavsky(n, n0)
        assert relu_lower_serra((n,), n0) == zaslavsky(n, n0)
        assert maxout_upper_mrz((n,), n0, 2) == zaslavsky(n, n0)  # rank 2 maxout ~ one hyperplane per unit
        assert maxout_lower((n,), n0, 2) == zaslavsky(n, n0)


def test_thm44_is_maxout_lower_with_k_T_width_mT_n0_q():
    for m, T, q, D in itertools.product(range(1, 4), range(2, 5), range(1, 4), range(3, 13)):
        L = D // 3
        if L > 1 and m * T < q:
            continue
        expected = ((m * T // q) * (T - 1) + 1) ** (q * (L - 1)) * sum(
            comb(m * T, j) * (T - 1) ** j for j in range(q + 1)
        )
        assert transformer_maxout_lower(m, T, q, D) == expected
        assert transformer_maxout_lower(m, T, q, D) == maxout_lower((m * T,) * L, q, T)


def test_thm44_floor_differs_from_the_unfloored_seed_only_when_q_does_not_divide_mT():
    # (m,T,q,D) = (1,3,2,6): mT/q = 1.5; the floored bound uses 1
    assert transformer_maxout_lower(1, 3, 2, 6) == (1 * 2 + 1) ** 2 * (1 + 3 * 2 + 3 * 4)


def test_relu_lower_formulas():
    for widths, n0 in [((6, 3), 2), ((6, 6, 3), 2), ((9, 9, 5), 3), ((3, 3, 3), 1), ((7, 4), 2)]:
        last = zaslavsky(widths[-1], n0)
        assert relu_lower_serra(widths, n0) == prod((n // n0 + 1) ** n0 for n in widths[:-1]) * last
        assert relu_lower_montufar(widths, n0) == prod((n // n0) ** n0 for n in widths[:-1]) * last
        assert relu_lower_montufar(widths, n0) < relu_lower_serra(widths, n0)


def test_maxout_upper_formulas_on_small_cases():
    # MRZ 2022: d_l = min(n0, n_1..n_{l-1}); Serra 2018: d_l = min(n0, n_1..n_l)
    assert maxout_upper_mrz((3, 1, 4), 2, 3) == (1 + 3 * 2 + 3 * 4) * (1 + 1 * 2) * (1 + 4 * 2)
    assert maxout_upper_serra((3, 1, 4), 2, 3) == (1 + 9 + 36) * (1 + 3) * (1 + 12)
    assert maxout_upper_serra((2,), 1, 2) == 1 + 2


def test_validity_conditions_raise_one_line_errors():
    cases = [
        (relu_lower_montufar, ((1, 3), 2)),
        (relu_lower_serra, ((5, 3), 2)),
        (maxout_lower, ((1, 3), 2, 3)),
        (transformer_maxout_lower, (1, 2, 1, 2)),
        (transformer_maxout_lower, (1, 2, 3, 6)),  # mT = 2 < q = 3 with two layers
        (zaslavsky, (3, 0)),
        (maxout_lower, ((3,), 1, 1)),
        (relu_upper_serra, ((), 1)),
        (relu_upper_serra, ((2.5,), 1)),
        (relu_upper_serra, ((None,), 1)),
        (zaslavsky, ("three", 1)),
    ]
    for f, args in cases:
        with pytest.raises(ValueError) as e:
            f(*args)
        assert "\n" not in str(e.value)
    # the conditions bind hidden layers only: a narrow last layer is a plain arrangement
    assert relu_lower_serra((6, 1), 2) == 16 * 2
    assert maxout_lower((2, 1), 2, 3) == 3**2 * 3


def test_bounds_are_monotone_in_widths_and_rank():
    base = (6, 6, 6)
    for n0 in (1, 2):
        for l in range(3):
            for n in range(6, 12):
                w = list(base)
                w[l] = n
                w2 = list(w)
                w2[l] = n + 1
                for f in (relu_lower_serra, relu_upper_serra, relu_lower_montufar):
                    assert f(tuple(w), n0) <= f(tuple(w2), n0)
                for f in (maxout_lower, maxout_upper_mrz, maxout_upper_serra):
                    assert f(tuple(w), n0, 3) <= f(tuple(w2), n0, 3)
        for k in range(2, 6):
            for f in (maxout_lower, maxout_upper_mrz, maxout_upper_serra):
                assert f(base, n0, k) <= f(base, n0, k + 1)
    for m, T, q, D in itertools.product(range(1, 3), range(2, 4), range(1, 3), range(3, 12)):
        v = transformer_maxout_lower(m, T, q, D)
        assert v <= transformer_maxout_lower(m + 1, T, q, D)
        assert v <= transformer_maxout_lower(m, T + 1, q, D)
        assert v <= transformer_maxout_lower(m, T, q, D + 1)


def test_relu_lower_never_exceeds_upper():
    for n0 in (1, 2, 3):
        for L in (1, 2, 3):
            for widths in itertools.product(range(3 * n0, 3 * n0 + 4), repeat=L):
                lower = relu_lower_serra(widths, n0)
                assert relu_lower_montufar(widths, n0) <= lower <= relu_upper_serra(widths, n0), widths


def test_maxout_lower_never_exceeds_upper_where_attained():
    # where the fold construction attains the lower formula (even floor(n_l/n0) or k = 2), it is a
    # true count, so it must sit below both upper bounds
    for n0, k, L in itertools.product((1, 2, 3), (2, 3, 4), (1, 2, 3)):
        for widths in itertools.product(range(n0, 3 * n0 + 2), repeat=L):
            if k > 2 and any((n // n0) % 2 for n in widths[:-1]):
                continue
            lower = maxout_lower(widths, n0, k)
            assert lower <= maxout_upper_mrz(widths, n0, k), (widths, n0, k)
            assert lower <= maxout_upper_serra(widths, n0, k), (widths, n0, k)


def test_odd_p_caveat_formula_can_exceed_what_is_attainable():
    # DESIGN §4: a width-1 rank-3 maxout net on R with L = 2 has at most 7 regions; the formula says 9,
    # which here even meets the MRZ upper bound, so it cannot be a lower bound in that case
    assert maxout_lower((1, 1), 1, 3) == 9
    assert maxout_upper_mrz((1, 1), 1, 3) == 9


def test_registry_describes_and_evaluates_every_bound():
    expected = {
        "zaslavsky",
        "relu_lower_montufar",
        "relu_lower_serra",
        "relu_upper_serra",
        "maxout_lower",
        "maxout_upper_mrz",
        "maxout_upper_serra",
        "transformer_maxout_lower",
    }
    assert set(BOUNDS) == expected
    for name, spec in BOUNDS.items():
        assert spec.name == name and spec.citation and spec.description and "\n" not in spec.description
        assert spec.kind in ("exact", "lower", "upper")
        assert spec.architecture in ("relu", "maxout", "transformer")
    assert BOUNDS["transformer_maxout_lower"].params == ("m", "T", "q", "D")
    assert BOUNDS["maxout_lower"].params == ("widths", "n0", "k")
    assert BOUNDS["transformer_maxout_lower"](m=4, T=3, q=2, D=6, widths=None) == 48_841
    assert BOUNDS["relu_lower_serra"](widths=[6, 6, 3], n0=2, k=None) == 1792
    with pytest.raises(ValueError, match="--k"):
        BOUNDS["maxout_lower"](widths=(4, 2), n0=2)
