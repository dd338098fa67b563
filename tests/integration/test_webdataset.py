"""WebDataset tar shards read as they are (src/io/tar_dataset.cc), written
by Python's tarfile in the layouts tools produce (ustar, GNU long names,
PAX), and their faults."""
import io
import pathlib
import tarfile

import numpy as np
import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def folder(tmp_path_factory, gen_dataset):
    return gen_dataset(tmp_path_factory.mktemp("wds") / "images", 60, 3)


def write_tars(folder, out, per_tar=25, fmt=tarfile.USTAR_FORMAT, long_keys=False):
    """The folder's files in sorted order (ImageFolder's), as WebDataset samples."""
    out.mkdir(parents=True, exist_ok=True)
    classes = sorted(p.name for p in folder.iterdir())
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    for t in range(0, len(files), per_tar):
        with tarfile.open(out / f"shard-{t // per_tar:04d}.tar", "w", format=fmt) as tar:
            for i, f in enumerate(files[t:t + per_tar], start=t):
                key = f"{f.parent.name}/{i:06d}" + ("_" + "x" * 120 if long_keys else "")
                for name, data in ((f"{key}{f.suffix}", f.read_bytes()),
                                   (f"{key}.cls", str(classes.index(f.parent.name)).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return out


@pytest.mark.parametrize("fmt,long_keys", [(tarfile.USTAR_FORMAT, False), (tarfile.GNU_FORMAT, True),
                                           (tarfile.PAX_FORMAT, True)])
def test_tars_load_like_the_folder(folder, tmp_path, fmt, long_keys):
    import feedline
    tars = write_tars(folder, tmp_path / "tars", fmt=fmt, long_keys=long_keys)
    x = feedline.Loader(folder, batch_size=12, shuffle=True, seed=6, num_threads=2)
    y = feedline.Loader(tars, batch_size=12, shuffle=True, seed=6, num_threads=2)
    assert len(x) == len(y) == 5
    for (xi, xl), (yi, yl) in zip(x, y):
        assert torch.equal(xi, yi) and torch.equal(xl, yl)
    single = feedline.Loader(sorted(tars.glob("*.tar"))[0], batch_size=5)
    assert len(single) == 5


def test_corrupt_and_truncated_tars_name_the_place(folder, tmp_path):
    import feedline
    tars = write_tars(folder, tmp_path / "tars")
    first = sorted(tars.glob("*.tar"))[0]
    with tarfile.open(first) as t:
        third_header = t.getmembers()[2].offset
    data = bytearray(first.read_bytes())
    data[third_header + 10] ^= 0x20  # a byte of the third member's name
    bad = tmp_path / "bad" / "x.tar"
    bad.parent.mkdir()
    bad.write_bytes(bytes(data))
    with pytest.raises(feedline.Error, match=rf"x\.tar' member header at offset {third_header}: header checksum"):
        feedline.Loader(bad, batch_size=4)
    cut = tmp_path / "cut" / "y.tar"
    cut.parent.mkdir()
    cut.write_bytes(first.read_bytes()[: 512 * 20 + 100])
    with pytest.raises(feedline.Error, match=r"y\.tar.*(runs past the end|truncated)"):
        feedline.Loader(cut, batch_size=4)
    header = bytearray(first.read_bytes())
    header[148:156] = b"0000000\0"  # header checksum of the first member
    hc = tmp_path / "hc" / "z.tar"
    hc.parent.mkdir()
    hc.write_bytes(bytes(header))
    with pytest.raises(feedline.Error, match=r"z\.tar' member header at offset 0: header checksum mismatch"):
        feedline.Loader(hc, batch_size=4)


def test_every_image_format_the_decoders_know_is_a_webdataset_image(tmp_path):
    from PIL import Image

    import feedline
    img = Image.fromarray(np.arange(24 * 32 * 3, dtype=np.uint8).reshape(24, 32, 3))
    with tarfile.open(tmp_path / "f.tar", "w") as tar:
        for i, (ext, fmt) in enumerate([("webp", "WEBP"), ("bmp", "BMP"), ("ppm", "PPM"), ("tiff", "TIFF"),
                                        ("gif", "GIF"), ("png", "PNG")]):
            buf = io.BytesIO()
            img.save(buf, format=fmt, **({"lossless": True} if fmt == "WEBP" else {}))
            for name, data in [(f"s{i}.{ext}", buf.getvalue()), (f"s{i}.cls", str(i).encode())]:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    loader = feedline.Loader(tmp_path / "f.tar", batch_size=6,
                             transform=feedline.transforms.imagenet_eval(16, resize=16))
    images, labels = next(iter(loader))
    assert labels.tolist() == [0, 1, 2, 3, 4, 5]
    assert images.shape == (6, 3, 16, 16)
    loader.close()


def test_samples_without_images_or_with_split_keys_are_refused(tmp_path):
    import feedline
    def tar_of(path, members):
        with tarfile.open(path, "w") as tar:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    jpg = (ROOT / "tests" / "fuzz" / "corpus" / "image" / "rgb.jpg").read_bytes()
    tar_of(tmp_path / "a.tar", [("k1.cls", b"3"), ("k1.txt", b"hi")])
    with pytest.raises(feedline.Error, match=r"sample 'k1' has no image member \(jpg jpeg png webp"):
        feedline.Loader(tmp_path / "a.tar", batch_size=1)
    # Two images in one sample: refused, never one of them silently.
    tar_of(tmp_path / "d.tar", [("k1.jpg", jpg), ("k1.png", jpg), ("k1.cls", b"1")])
    with pytest.raises(feedline.Error, match=r"sample 'k1' has a second image member 'k1.png'"):
        feedline.Loader(tmp_path / "d.tar", batch_size=1)
    tar_of(tmp_path / "b.tar", [("k1.jpg", jpg), ("k2.jpg", jpg), ("k1.cls", b"1")])
    with pytest.raises(feedline.Error, match="key 'k1' appears again"):
        feedline.Loader(tmp_path / "b.tar", batch_size=1)
    tar_of(tmp_path / "c.tar", [("k1.jpg", jpg), ("k1.cls", b"cat")])
    with pytest.raises(feedline.Error, match="does not hold an integer label"):
        feedline.Loader(tmp_path / "c.tar", batch_size=1)
    # A label past int64 is refused, never clamped to a wrong one.
    tar_of(tmp_path / "e.tar", [("k1.jpg", jpg), ("k1.cls", b"99999999999999999999")])
    with pytest.raises(feedline.Error, match="does not hold an integer label"):
        feedline.Loader(tmp_path / "e.tar", batch_size=1)
