import pytest


@pytest.fixture(scope="session")
def dataset(tmp_path_factory, gen_dataset):
    """A small generated ImageNet-like folder: 96 images in 4 classes."""
    return gen_dataset(tmp_path_factory.mktemp("data") / "imagenet-like", 96, 4)
