"""The error classes of python/bindings/errors.cc: every error the extension
raises is a feedline.Error and also the builtin its cause maps to."""
import builtins
import io
import os

import pytest
from PIL import Image

import feedline


@pytest.mark.parametrize("name, builtin", [("InvalidArgumentError", ValueError), ("OutOfRangeError", ValueError),
                                           ("NotFoundError", FileNotFoundError),
                                           ("TimeoutError", builtins.TimeoutError),
                                           ("ResourceError", None), ("CancelledError", None)])
def test_every_error_class_is_a_feedline_error_and_its_builtin(name, builtin):
    cls = getattr(feedline, name)
    assert name in feedline.__all__
    assert cls is getattr(feedline._C, name)
    assert issubclass(cls, feedline.Error) and issubclass(cls, RuntimeError)
    if builtin is not None:
        assert issubclass(cls, builtin)
    err = cls("a message")
    assert str(err) == "a message"


def test_a_missing_folder_is_a_not_found_error(tmp_path):
    with pytest.raises(feedline.NotFoundError) as e:
        feedline.Loader(str(tmp_path / "nope"))
    assert isinstance(e.value, FileNotFoundError)
    assert str(tmp_path / "nope") in str(e.value)


def _oversized_jpeg():
    """A valid 8x8 JPEG whose frame header claims 20000x20000 (4e8 pixels,
    over the default max_pixels of 2^28): refused from the header."""
    out = io.BytesIO()
    Image.new("RGB", (8, 8), (10, 20, 30)).save(out, format="JPEG")
    data = bytearray(out.getvalue())
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = (20000).to_bytes(2, "big") * 2  # height, width
    return bytes(data)


def test_an_oversized_image_is_a_feedline_error_as_documented(tmp_path):
    os.makedirs(tmp_path / "c")
    (tmp_path / "c" / "big.jpg").write_bytes(_oversized_jpeg())
    with feedline.Loader(str(tmp_path), batch_size=1, num_threads=1,
                         transform=feedline.transforms.imagenet_eval(16, 16)) as loader:
        with pytest.raises(feedline.Error, match="over max_pixels") as e:
            list(loader)
    assert isinstance(e.value, feedline.InvalidArgumentError) and isinstance(e.value, ValueError)
    assert "big.jpg" in str(e.value)


def test_a_closed_loader_raises_a_feedline_error(tmp_path):
    os.makedirs(tmp_path / "c")
    out = io.BytesIO()
    Image.new("RGB", (8, 8)).save(out, format="JPEG")
    (tmp_path / "c" / "a.jpg").write_bytes(out.getvalue())
    loader = feedline.Loader(str(tmp_path), batch_size=1, num_threads=1)
    loader.close()
    with pytest.raises(feedline.Error, match="closed"):
        len(loader)
