"""The Examples sections of the central entry points run, and say what they print (shapely-style doctests)."""

import doctest
import importlib

import pytest

#: module -> the functions whose docstrings must hold a runnable example
ENTRY_POINTS = {
    "regioncount._count": ["count_regions"],
    "regioncount._domain": ["Box.as_dict", "AffineSlice.as_dict", "domain_from_dict"],
    "regioncount.engines._plane._driver": ["partition_plane"],
    "regioncount.engines._line._walk": ["walk_line"],
    "regioncount.engines._space._driver": ["partition_space"],
    "regioncount.theory._bounds": ["relu_upper_serra"],
}


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_examples_of_the_entry_points_run(module):
    mod = importlib.import_module(module)
    tests = {t.name.removeprefix(f"{module}."): t for t in doctest.DocTestFinder().find(mod) if t.examples}
    missing = [name for name in ENTRY_POINTS[module] if name not in tests]
    assert not missing, f"{module}: no Examples section in {missing}"
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    for test in tests.values():
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0 and result.attempted >= len(ENTRY_POINTS[module])
