"""Fixtures shared by the pytest suites (tests/integration, tests/python)."""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# pyarrow, for the tests that write Parquet and Arrow files: the package the
# build linked Arrow C++ from (FEEDLINE_PYARROW_DIR, set by the Makefile), its
# folder appended to sys.path so that the interpreter's own packages (numpy)
# come first. The same libarrow is then loaded once, by both.
_PYARROW_DIR = os.environ.get("FEEDLINE_PYARROW_DIR", "")
if _PYARROW_DIR and os.path.isdir(_PYARROW_DIR) and os.path.dirname(_PYARROW_DIR) not in sys.path:
    sys.path.append(os.path.dirname(_PYARROW_DIR))


@pytest.fixture(scope="session")
def feedline_bin():
    path = pathlib.Path(os.environ.get("FEEDLINE_BIN", ROOT / "build" / "tools" / "feedline"))
    if not path.exists():
        pytest.fail(f"feedline binary not found at {path}; run `make build` or set FEEDLINE_BIN")
    return str(path)


@pytest.fixture(scope="session")
def gen_dataset(feedline_bin):
    """Makes an ImageNet-like ImageFolder from the repo's photographs:
    gen_dataset(root, images, classes) -> root."""
    def make(root, images, classes):
        subprocess.run([feedline_bin, "gen-dataset", str(root), "--images", str(images), "--classes", str(classes),
                        "--photos", str(ROOT / "tests" / "data" / "photos")], check=True, capture_output=True)
        return root
    return make
