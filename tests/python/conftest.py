import pytest


@pytest.fixture(scope="session")
def dataset(tmp_path_factory, gen_dataset):
    """A small generated ImageNet-like folder: 96 images in 4 classes."""
    return gen_dataset(tmp_path_factory.mktemp("data") / "imagenet-like", 96, 4)


def _resized_copy(src, dst, short=None, long=None):
    """Re-encodes every image of an ImageFolder tree as JPEG at a new size
    (short or long side in pixels), keeping the class folders."""
    import pathlib

    from PIL import Image
    for p in sorted(pathlib.Path(src).rglob("*")):
        if p.is_file():
            q = (pathlib.Path(dst) / p.relative_to(src)).with_suffix(".jpg")
            q.parent.mkdir(parents=True, exist_ok=True)
            with Image.open(p) as im:
                im = im.convert("RGB")
                w, h = im.size
                s = short / min(w, h) if short else long / max(w, h)
                im.resize((max(1, round(w * s)), max(1, round(h * s))), Image.BILINEAR).save(q, quality=90)
    return dst


@pytest.fixture(scope="session")
def resized_copy():
    return _resized_copy


@pytest.fixture(scope="session")
def small_images(tmp_path_factory, gen_dataset):
    """256 ImageNet-like photographs stored at 72 px on the short side: cheap
    to decode, so planted costs dominate (doctor tests)."""
    raw = gen_dataset(tmp_path_factory.mktemp("raw") / "small", 256, 4)
    return _resized_copy(raw, tmp_path_factory.mktemp("data") / "small", short=72)


@pytest.fixture(scope="session")
def large_images(tmp_path_factory, gen_dataset):
    """24 photographs stored at 1600 px on the long side: decode-heavy."""
    raw = gen_dataset(tmp_path_factory.mktemp("raw") / "large", 24, 2)
    return _resized_copy(raw, tmp_path_factory.mktemp("data") / "large", long=1600)


@pytest.fixture(scope="module")
def report(small_images):
    """One real two-epoch loop, diagnosed (once per test module that uses it)."""
    import time

    import feedline.doctor

    from doctor_plants import report_loader

    with feedline.doctor.Doctor() as doctor:
        loader = report_loader(small_images)
        for _ in range(2):
            for _batch in doctor.watch(loader):
                time.sleep(0.003)
        return doctor.report(file=None)
