"""Model files that issues name live in ``shared/data`` beside the repository (as CI lays it out)."""

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def shared_file(name: str) -> Path:
    """The path of ``shared/data/<name>``; skips the test where the folder is not there."""
    path = DATA / name
    if not path.exists():
        pytest.skip(f"{path} is not here")
    return path
