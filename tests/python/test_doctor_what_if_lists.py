"""What feedline would give for a DataLoader over a CSV / JSON Lines list of
named fields (doctor/what_if_lists.py; docs/doctor.md "What feedline would
give"): a dataset that declares its list (list_path, fields, transform)
gets the measured rate and the exact fields= code change; anything the
doctor cannot be sure of gives its reason. No timing thresholds."""
import csv
import json
import os
import shutil
import time

import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, Subset

import feedline.doctor

from doctor_plants import tf

FIELDS = {"image": "image:path", "caption": "text:caption"}


def _rows(small_images, into, n=40):
    """n rows of (image path relative to the list, caption), images copied under into/img."""
    (into / "img").mkdir()
    images = sorted(os.path.join(d, f) for d, _, fs in os.walk(small_images) for f in fs)[:n]
    rows = []
    for i, src in enumerate(images):
        dst = f"img/{i:03d}{os.path.splitext(src)[1]}"
        shutil.copy(src, into / dst)
        rows.append({"path": dst, "caption": f"picture {i}, with a comma"})
    return rows


def _write(rows, path):
    if path.suffix == ".csv":
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["path", "caption"])
            w.writeheader()
            w.writerows(rows)
    else:
        with open(path, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return path


class CaptionRows(Dataset):
    """A user's image-caption list dataset: item i is {"image":
    transform(row i's image), "caption": row i's text}. Without the protocol
    the doctor cannot know that."""

    def __init__(self, path, transform):
        self.path, self.transform = path, transform
        self.base = os.path.dirname(os.path.abspath(path))
        if str(path).endswith(".csv"):
            with open(path, newline="") as f:
                self.rows = list(csv.DictReader(f))
        else:
            with open(path) as f:
                self.rows = [json.loads(line) for line in f if line.strip()]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        r = self.rows[i]
        with Image.open(os.path.join(self.base, r["path"])) as im:
            image = self.transform(im.convert("RGB"))
        return {"image": image, "caption": r["caption"]}


class Captions(CaptionRows):
    """The same dataset declaring its list for the doctor (docs/doctor.md)."""

    def __init__(self, path, transform, fields=FIELDS):
        super().__init__(path, transform)
        self.list_path, self.fields = path, fields


def watched(loader, step_s=0.002, **kwargs):
    kwargs.setdefault("what_if_s", 1.0)
    with feedline.doctor.Doctor(**kwargs) as doctor:
        for _batch in doctor.watch(loader):
            time.sleep(step_s)
        return doctor.report(file=None)


def finding(report, fid):
    return next((f for f in report.findings if f["id"] == fid), None)


@pytest.mark.parametrize("ext", [".jsonl", ".csv"])
def test_a_declared_list_gets_the_measured_rate_and_the_fields_code(small_images, tmp_path, ext):
    rows = _rows(small_images, tmp_path)
    path = _write(rows, tmp_path / f"captions{ext}")
    report = watched(DataLoader(Captions(str(path), tf()), batch_size=8, shuffle=True))
    assert feedline.doctor.validate(report.data)
    w = report.data["what_if"]
    assert w["ran"] and w["reason"] is None, w
    assert w["dataset"] == "Captions" and w["root"] == str(path) and w["files"] == len(rows)
    assert w["batch_size"] == 8 and w["samples"] > 0 and w["samples_per_s"] > 0
    assert "resize" in w["transform"].lower()
    code = (f"import feedline\nloader = feedline.Loader({str(path)!r}, batch_size=8, shuffle=True, "
            "fields={'image': 'image:path', 'caption': 'text:caption'}, transform=transform)")
    assert w["code"] == code
    f = finding(report, "feedline_what_if")
    assert f is not None and f["fix"].endswith(code) and f["evidence"]["feedline_samples_per_s"] == w["samples_per_s"]
    assert "feedline.Loader on 40 of your files" in report.summary()


def test_the_sample_list_reads_the_same_files_from_elsewhere(small_images, tmp_path):
    """Relative file columns made absolute; a Subset's rows only, spread out."""
    from feedline.doctor import what_if, what_if_lists
    rows = _rows(small_images, tmp_path)
    path = _write(rows, tmp_path / "captions.jsonl")
    ds = Captions(str(path), tf())
    loader = DataLoader(Subset(ds, list(range(0, 40, 2))), batch_size=4)
    p = what_if._recognise(loader, None, ["image", "caption"])
    assert isinstance(p, what_if_lists.ListPlan) and p.indices == list(range(0, 40, 2))
    out = tmp_path / "out"
    out.mkdir()
    sample, n, read = what_if_lists.sample_list(p, 5, str(out), repeats=2)
    assert (n, read) == (5, 20)
    with open(sample) as f:
        got = [json.loads(line) for line in f]
    picked = [rows[i] for i in range(0, 40, 2)][::4][:5]
    assert got == [{**r, "path": str(tmp_path / r["path"])} for r in picked] * 2
    w = watched(loader).data["what_if"]
    assert w["ran"], w
    assert any("reads 20 of the list's rows" in n for n in w["notes"])


def test_what_the_doctor_cannot_be_sure_of_is_a_reason(small_images, tmp_path):
    rows = _rows(small_images, tmp_path, n=16)
    path = _write(rows, tmp_path / "captions.jsonl")
    w = watched(DataLoader(CaptionRows(str(path), tf()), batch_size=4)).data["what_if"]
    assert not w["ran"] and "CaptionRows is a dataset the doctor does not know" in w["reason"]
    assert "list_path and fields" in w["reason"]
    # Declared fields that are not the items' keys.
    wrong = Captions(str(path), tf(), fields={"image": "image:path", "text": "text:caption"})
    w = watched(DataLoader(wrong, batch_size=4)).data["what_if"]
    assert not w["ran"] and "keys ['caption', 'image']" in w["reason"] and "['image', 'text']" in w["reason"]
    # A list feedline does not read, a missing one, fields it does not take.
    for list_path, fields, words in [(str(tmp_path / "captions.txt"), FIELDS, "not a .csv or .jsonl"),
                                     (str(tmp_path / "gone.jsonl"), FIELDS, "is not a file"),
                                     (str(path), ["image"], "not the mapping"),
                                     (str(path), {"image": "image:", "caption": "text:caption"}, "no parts named")]:
        ds = Captions(str(path), tf())
        ds.list_path, ds.fields = list_path, fields
        w = watched(DataLoader(ds, batch_size=4)).data["what_if"]
        assert not w["ran"] and words in w["reason"], (words, w["reason"])
    # Image fields without a transform; a custom collate_fn; a member with no native equivalent.
    ds = Captions(str(path), tf())
    ds.transform = None
    from feedline.doctor import what_if
    w = what_if.run(DataLoader(ds, batch_size=4), batch_keys=["image", "caption"])
    assert not w.ran and "no transform for its image fields" in w.reason
    w = watched(DataLoader(Captions(str(path), tf()), batch_size=4,
                           collate_fn=_own_collate)).data["what_if"]
    assert not w["ran"] and "collate_fn=_own_collate" in w["reason"]
    w = watched(DataLoader(Captions(str(path), tf(_Twist())), batch_size=4)).data["what_if"]
    assert not w["ran"] and "no native equivalent" in w["reason"] and "_Twist" in w["reason"]


def _own_collate(items):
    return {"image": torch.stack([i["image"] for i in items]), "caption": [i["caption"] for i in items]}


class _Twist(torch.nn.Module):
    def forward(self, x):
        return x


def test_a_webdataset_pipeline_is_recognised_or_named(small_images, tmp_path):
    wds = pytest.importorskip("webdataset")
    import io
    import tarfile
    images = sorted(os.path.join(d, f) for d, _, fs in os.walk(small_images) for f in fs if f.endswith(".jpg"))[:24]
    shard = tmp_path / "shard-000.tar"
    with tarfile.open(shard, "w") as t:
        for i, src in enumerate(images):
            for ext, data in (("jpg", open(src, "rb").read()), ("cls", str(i % 3).encode())):
                info = tarfile.TarInfo(f"{i:05d}.{ext}")
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    ds = wds.WebDataset(str(shard)).decode("pil").to_tuple("jpg", "cls").map_tuple(tf(), lambda c: c)
    w = watched(DataLoader(ds, batch_size=4)).data["what_if"]
    if w["ran"]:
        assert w["dataset"] == "WebDataset" and w["samples_per_s"] > 0
        assert w["code"].startswith(f"import feedline\nloader = feedline.Loader({str(shard)!r}, batch_size=4")
    else:
        assert "WebDataset" in w["reason"]
