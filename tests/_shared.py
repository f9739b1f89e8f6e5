"""Model files that issues name live in ``shared/data`` beside the repository (as CI lays it out); the
environment of the fresh Python processes that tests start."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
#: Set to 1 where the tests run against an installed wheel (``.ci/run``): fresh processes then import the
#: installed packages, not the source tree.
INSTALLED = os.environ.get("REGIONCOUNT_TEST_INSTALLED") == "1"


def subprocess_env(**extra: str) -> dict[str, str]:
    """``os.environ`` plus ``extra``, with the source tree (``regioncount`` and ``cli/``) as PYTHONPATH, or,
    against an installed wheel, without PYTHONPATH."""
    env = {**os.environ, **extra}
    if INSTALLED:
        env.pop("PYTHONPATH", None)
    else:
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "cli")])
    return env


def shared_file(name: str) -> Path:
    """The path of ``shared/data/<name>``; skips the test where the folder is not there."""
    path = DATA / name
    if not path.exists():
        pytest.skip(f"{path} is not here")
    return path
