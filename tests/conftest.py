"""Fixtures shared by the pytest suites (tests/integration, tests/python)."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


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
