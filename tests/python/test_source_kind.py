"""One source-kind rule (include/feedline/source.h DetectSourceKind), asked by
the loader and the doctor alike: they never disagree about a path."""
import io
import tarfile

import numpy as np
from PIL import Image

import feedline
from feedline import _C
from feedline.doctor.feedline_loader import source_kind


def jpeg_bytes():
    buf = io.BytesIO()
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(buf, format="JPEG")
    return buf.getvalue()


def write_tar(path):
    with tarfile.open(path, "w") as tar:
        for name, data in [("s0.jpg", jpeg_bytes()), ("s0.cls", b"0")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_each_kind_by_the_engines_rule(tmp_path):
    folder = tmp_path / "folder"
    (folder / "cat").mkdir(parents=True)
    (folder / "cat" / "a.jpg").write_bytes(jpeg_bytes())
    tars = tmp_path / "tars"
    tars.mkdir()
    write_tar(tars / "part-0.tar")
    packed = tmp_path / "packed"
    packed.mkdir()
    (packed / "manifest.json").write_text("{}")
    cases = {folder: "folder", tars: "tar", tars / "part-0.tar": "tar", packed: "packed",
             "https://example.invalid/data": "url", tmp_path / "missing": "folder"}
    for path, kind in cases.items():
        assert source_kind(str(path)) == kind, path
    assert _C.source_kind(str(packed)) == "shards"


def test_a_folder_with_tars_and_class_folders_is_a_folder_for_loader_and_doctor(tmp_path):
    # The first wave's Python rule called this "tar", the engine "folder".
    (tmp_path / "cat").mkdir()
    (tmp_path / "cat" / "a.jpg").write_bytes(jpeg_bytes())
    write_tar(tmp_path / "stray.tar")
    assert source_kind(str(tmp_path)) == "folder"
    with feedline.Loader(tmp_path, batch_size=1, transform=feedline.transforms.imagenet_eval(8, resize=8),
                         num_threads=1) as loader:
        assert loader.classes == ["cat"]
