import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def dataset(tmp_path_factory, feedline_bin):
    """A small generated ImageNet-like folder: 96 images in 4 classes."""
    root = tmp_path_factory.mktemp("data") / "imagenet-like"
    subprocess.run([feedline_bin, "gen-dataset", str(root), "--images", "96", "--classes", "4",
                    "--photos", str(ROOT / "tests" / "data" / "photos")], check=True, capture_output=True)
    return root
