import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PHOTOS = ROOT / "tests" / "data" / "photos"


@pytest.fixture(scope="session")
def feedline_bin():
    path = pathlib.Path(os.environ.get("FEEDLINE_BIN", ROOT / "build" / "tools" / "feedline"))
    if not path.exists():
        pytest.fail(f"feedline binary not found at {path}; run `make build` or set FEEDLINE_BIN")
    return str(path)


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed: {proc.stderr}")
    return proc.stdout
