"""Fixtures shared by the pytest suites (tests/integration, tests/python)."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def feedline_bin():
    path = pathlib.Path(os.environ.get("FEEDLINE_BIN", ROOT / "build" / "tools" / "feedline"))
    if not path.exists():
        pytest.fail(f"feedline binary not found at {path}; run `make build` or set FEEDLINE_BIN")
    return str(path)
