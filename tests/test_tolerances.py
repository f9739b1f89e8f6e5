"""docs/design.md §3 lists every named tolerance of regioncount/_tolerances.py with its value, and the
predicates are one copy: these tests fail when the two drift."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import pytest

from regioncount import _predicates as pr, _tolerances as tol

DOC = Path(__file__).resolve().parents[1] / "docs" / "design.md"


def _section3() -> str:
    text = DOC.read_text()
    return text[text.index("## 3.") : text.index("## 4.")]


def _value(s: str) -> float:
    s = s.strip().rstrip(".")
    m = re.fullmatch(r"2\^(-?\d+)", s)
    return 2.0 ** int(m.group(1)) if m else float(s)


def test_design_section_3_lists_every_tolerance_with_its_value():
    found = re.findall(r"`([A-Z][A-Z0-9_]+)` = ([0-9.e^-]+)", _section3())
    listed = {name: _value(v) for name, v in found if name != "TINY"}  # TINY: a predicate, not a tolerance
    module = {name: getattr(tol, name) for name in tol.__all__}
    assert set(listed) == set(module), (sorted(set(listed) - set(module)), sorted(set(module) - set(listed)))
    for name, value in module.items():
        assert listed[name] == value, name


def test_the_engines_use_the_one_copy_of_the_constants():
    from regioncount.engines import _line, _whole_plane
    from regioncount.engines._plane import _argmax
    from regioncount.engines._space import _predicates as _space

    assert _line._ZERO == tol.LINE_ZERO and _line._NOISE == tol.LINE_NOISE
    assert _line._gamma is pr.gamma and _space._gamma is pr.gamma
    assert _line._TINY == pr.ETA and _line._dyadic is pr.dyadic
    assert _space.SNAP == tol.SPACE_SNAP
    assert _whole_plane._PARALLEL == tol.WHOLE_PLANE_PARALLEL and _whole_plane._SNAP == tol.WHOLE_PLANE_SNAP
    assert _argmax.ALIAS_TOL == tol.ARGMAX_ALIAS


@pytest.mark.parametrize("n", [1, 2, 3, 17, 101, 4097, 2**20 + 3])
def test_gamma_is_rounded_up(n):
    u = Fraction(1, 2**53)
    exact = n * u / (1 - n * u)
    assert Fraction(pr.gamma(n)) >= exact
    assert Fraction(pr.gamma(n)) <= exact * (1 + 8 * u)


def test_one_underflow_rule():
    assert pr.ETA == 2.0**-1074 == pr.underflow_slack(1)
    assert pr.TINY == pr.underflow_slack(2**74) == 2.0**-1000
    # a product that underflows loses at most ETA / 2 (round to nearest in the subnormal range)
    for x, y in [(2.0**-600, 2.0**-500 * 1.3), (3.1e-200, 7.7e-130), (1e-300, 1e-24)]:
        assert abs(Fraction(x * y) - Fraction(x) * Fraction(y)) <= Fraction(pr.ETA) / 2
