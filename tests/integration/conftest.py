"""Fixtures of the integration suites."""
import subprocess

import pytest


@pytest.fixture(scope="module")
def packed(tmp_path_factory, feedline_bin, gen_dataset):
    """80 generated images (4 classes) in base/images, packed into several
    shards under base/www/ds for a server to serve: -> base."""
    base = tmp_path_factory.mktemp("http")
    gen_dataset(base / "images", 80, 4)
    subprocess.run([feedline_bin, "pack", str(base / "images"), str(base / "www" / "ds"), "--shard-bytes", "900000"],
                   check=True, capture_output=True)
    return base
