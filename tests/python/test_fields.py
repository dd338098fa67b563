"""Samples with several named fields (docs/fields.md): WebDataset tars and
image folders mapped to fields, the dict batches, and the errors that name
the sample and the field."""
import io
import json
import pathlib
import re

import numpy as np
import pytest
import torch
import torchvision.transforms as T
from PIL import Image
from tar_samples import write_tar

import feedline
from feedline.transforms import from_torchvision

PHOTOS = pathlib.Path(__file__).resolve().parents[1] / "data" / "photos"


def _photo_jpeg(i):
    """A real photograph, re-encoded small (JPEG) so the test stays fast."""
    names = sorted(p for p in PHOTOS.iterdir() if p.suffix in (".jpg", ".png"))
    img = Image.open(names[i % len(names)]).convert("RGB")
    img = img.resize((96 + 8 * (i % 3), 80 + 4 * (i % 5)))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def _npy(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _samples(n):
    out = []
    for i in range(n):
        out.append((f"shard/{i:05d}", {
            "jpg": _photo_jpeg(i),
            "cls": str(i % 7).encode(),
            "txt": f"caption number {i} \u00e9\u4e16".encode(),
            "json": json.dumps({"id": i, "boxes": [[i, i + 1, 10, 20]]}).encode(),
            "npy": _npy(np.arange(6, dtype=np.float32).reshape(2, 3) + i),
        }))
    return out


FIELDS = {"image": "jpg;png", "label": "cls", "caption": "txt", "meta": "json", "depth": "npy"}


@pytest.fixture(scope="module")
def wds(tmp_path_factory):
    d = tmp_path_factory.mktemp("wds")
    samples = _samples(10)
    write_tar(d / "part-0000.tar", samples[:6])
    write_tar(d / "part-0001.tar", samples[6:])
    return d, samples


def test_every_field_round_trips_from_tars(wds):
    d, samples = wds
    tf = T.Compose([T.Resize(40), T.CenterCrop(32), T.ToTensor()])
    loader = feedline.Loader(d, batch_size=4, fields=FIELDS, transform=tf, num_threads=2)
    seen = []
    for batch in loader:
        assert set(batch) == set(FIELDS)
        n = len(batch["caption"])
        assert batch["image"].shape == (n, 3, 32, 32) and batch["image"].dtype == torch.float32
        assert batch["label"].dtype == torch.int64 and batch["label"].shape == (n,)
        assert batch["depth"].shape == (n, 2, 3) and batch["depth"].dtype == torch.float32
        for k in range(n):
            seen.append((int(batch["label"][k]), batch["caption"][k], batch["meta"][k], batch["depth"][k].clone(),
                         batch["image"][k].clone()))
    assert len(seen) == len(samples)
    single = T.Compose([T.Resize(40), T.CenterCrop(32), T.ToTensor()])
    for i, (label, caption, meta, depth, image) in enumerate(seen):
        members = samples[i][1]
        assert label == int(members["cls"])
        assert caption == members["txt"].decode("utf-8")
        assert meta == json.loads(members["json"])
        assert torch.equal(depth, torch.from_numpy(np.load(io.BytesIO(members["npy"]))))
        # The image field is the same decode + transform as on one image.
        expect = torch.from_numpy(np.frombuffer(feedline._C.transform_image(members["jpg"], from_torchvision(single)),
                                                np.float32).reshape(3, 32, 32).copy())
        assert torch.equal(image, expect)


def test_same_bytes_at_any_thread_count(wds):
    d, _ = wds
    def run(threads):
        loader = feedline.Loader(d, batch_size=3, fields=FIELDS, shuffle=True, seed=5, num_threads=threads,
                                 transform=T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(),
                                                      T.ToTensor()]))
        return [(b["image"].clone(), b["label"].clone(), b["caption"]) for b in loader]
    a, b = run(1), run(3)
    assert len(a) == len(b) == 4
    for (ia, la, ca), (ib, lb, cb) in zip(a, b):
        assert torch.equal(ia, ib) and torch.equal(la, lb) and ca == cb


def test_fields_without_an_image(tmp_path):
    # A tar of text and arrays only: no image member is needed.
    write_tar(tmp_path / "t.tar", [(f"k{i}", {"txt": f"t{i}".encode(), "npy": _npy(np.full((2,), i, np.int64))})
                                    for i in range(5)])
    loader = feedline.Loader(tmp_path / "t.tar", batch_size=5, fields={"text": "txt", "arr": "npy"})
    (batch,) = list(loader)
    assert batch["text"] == [f"t{i}" for i in range(5)]
    assert batch["arr"].tolist() == [[i, i] for i in range(5)]


def test_kind_prefix_and_raw_bytes(wds):
    d, samples = wds
    loader = feedline.Loader(d, batch_size=10, fields={"raw": "bytes:jpg", "cap": "text:txt"})
    (batch,) = list(loader)
    assert batch["raw"] == [s[1]["jpg"] for s in samples]
    assert batch["cap"][0] == samples[0][1]["txt"].decode()


def test_ndarrays_of_different_shapes_name_the_samples_or_come_as_lists(tmp_path):
    write_tar(tmp_path / "t.tar", [("a", {"npy": _npy(np.zeros((2, 2), np.float32))}),
                                    ("b", {"npy": _npy(np.zeros((3,), np.float32))})])
    loader = feedline.Loader(tmp_path / "t.tar", batch_size=2, fields={"x": "npy"})
    with pytest.raises(ValueError, match=r"field 'x': sample 1 has shape \(3,\).*collate=\"list\""):
        list(loader)
    loader.close()  # the traceback's frames would keep it open until collected
    loader = feedline.Loader(tmp_path / "t.tar", batch_size=2, fields={"x": "npy"}, collate="list")
    (batch,) = list(loader)
    assert [tuple(t.shape) for t in batch["x"]] == [(2, 2), (3,)]


@pytest.mark.parametrize("member, data, reason", [
    ("json", b"{not json", r"field 'meta' \(json\), part 'json': is not valid JSON"),
    ("json", b'{"a": 1}\x00, "b": 2}',
     r"field 'meta' \(json\), part 'json': is not valid JSON \(a NUL byte at offset 8\)"),
    ("txt", b"ok \xff\xfe", r"field 'caption' \(text\), part 'txt': is not UTF-8 text \(invalid byte at offset 3\)"),
    ("npy", b"\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'}", r"field 'depth' \(ndarray\), part 'npy': not a valid \.npy"),
    ("cls", b"seven", r"field 'label' \(label\), part 'cls': does not hold an integer label"),
])
def test_bad_content_names_file_key_field_and_reason(tmp_path, member, data, reason):
    samples = _samples(3)
    samples[1][1][member] = data
    write_tar(tmp_path / "bad.tar", samples)
    loader = feedline.Loader(tmp_path / "bad.tar", batch_size=3, fields=FIELDS)
    with pytest.raises(feedline.Error, match=reason) as e:
        list(loader)
    loader.close()  # the traceback's frames would keep it open until collected
    assert "bad.tar" in str(e.value) and "shard/00001" in str(e.value)
    # Under the skip policy the sample is dropped and counted, never silently.
    loader = feedline.Loader(tmp_path / "bad.tar", batch_size=3, fields=FIELDS, max_errors=1)
    (batch,) = list(loader)
    assert len(batch["caption"]) == 2
    assert loader.stats()["errors"]["skipped"] == 1


def test_a_missing_field_names_the_field_and_the_parts_the_sample_has(tmp_path):
    samples = _samples(2)
    del samples[1][1]["txt"]
    write_tar(tmp_path / "t.tar", samples)
    loader = feedline.Loader(tmp_path / "t.tar", batch_size=2, fields=FIELDS)
    with pytest.raises(feedline.Error, match=r"key 'shard/00001'.*field 'caption' \(text\): the sample has no "
                                             r"'txt' part \(it has 'jpg', 'cls', 'json', 'npy'\)"):
        list(loader)


def test_image_folder_gives_image_and_label(tmp_path):
    for c, cls in enumerate(["cat", "dog"]):
        (tmp_path / cls).mkdir()
        for i in range(3):
            (tmp_path / cls / f"{i}.jpg").write_bytes(_photo_jpeg(c * 3 + i))
    tf = T.Compose([T.Resize(20), T.CenterCrop(16), T.PILToTensor()])
    fields = feedline.Loader(tmp_path, batch_size=6, fields={"image": "jpg", "label": "cls"}, transform=tf)
    plain = feedline.Loader(tmp_path, batch_size=6, transform=tf)
    (fb,), ((images, labels),) = list(fields), list(plain)
    assert torch.equal(fb["image"], images) and torch.equal(fb["label"], labels)
    assert labels.tolist() == [0, 0, 0, 1, 1, 1]


def test_a_transform_per_image_field(tmp_path):
    big, small = _photo_jpeg(0), _photo_jpeg(1)
    write_tar(tmp_path / "t.tar", [("k", {"jpg": big, "seg.png": small})])
    # (a PNG member named seg.png: its part is "seg.png")
    loader = feedline.Loader(tmp_path / "t.tar", batch_size=1, fields={"image": "jpg", "mask": "image:seg.png"},
                             transform={"image": T.Compose([T.Resize(32), T.CenterCrop(32), T.ToTensor()]),
                                        "mask": T.Compose([T.Resize(8), T.CenterCrop(8), T.PILToTensor()])})
    (batch,) = list(loader)
    assert batch["image"].shape == (1, 3, 32, 32) and batch["image"].dtype == torch.float32
    assert batch["mask"].shape == (1, 3, 8, 8) and batch["mask"].dtype == torch.uint8


def test_bad_fields_arguments_are_refused_before_anything_opens(tmp_path):
    with pytest.raises(ValueError, match="non-empty dict"):
        feedline.Loader(tmp_path, fields={})
    with pytest.raises(ValueError, match="no parts"):
        feedline.Loader(tmp_path, fields={"x": ";"})
    with pytest.raises(ValueError, match="collate must be"):
        feedline.Loader(tmp_path, fields={"x": "txt"}, collate="pad")
    with pytest.raises(ValueError, match=r"not image fields"):
        feedline.Loader(tmp_path, fields={"x": "txt"}, transform={"x": T.ToTensor()})


def test_without_fields_the_pairs_are_unchanged(wds):
    d, samples = wds
    (images, labels), *_ = list(feedline.Loader(d, batch_size=10, transform=T.Compose([T.Resize(16), T.CenterCrop(16),
                                                                                        T.PILToTensor()])))
    assert labels.tolist() == [int(s[1]["cls"]) for s in samples]


# -- CSV / JSON Lines lists -----------------------------------------------------

def _list_files(tmp_path, n=5):
    (tmp_path / "img").mkdir()
    rows = []
    for i in range(n):
        (tmp_path / "img" / f"{i}.jpg").write_bytes(_photo_jpeg(i))
        np.save(tmp_path / "img" / f"{i}.npy", np.full((2, 2), i, np.int16))
        rows.append({"path": f"img/{i}.jpg", "label": i % 3, "caption": f'a "quoted", caption\nline {i}',
                     "meta": {"i": i, "tags": ["x"] * i}, "depth": f"img/{i}.npy"})
    return rows


LIST_FIELDS = {"image": "image:path", "label": "label:label", "caption": "text:caption", "meta": "json:meta",
               "depth": "ndarray:depth"}


def _check_list_batches(loader, tmp_path, rows):
    tf = T.Compose([T.Resize(24), T.CenterCrop(24), T.PILToTensor()])
    got = []
    for batch in loader:
        for k in range(len(batch["caption"])):
            got.append((batch["image"][k].clone(), int(batch["label"][k]), batch["caption"][k], batch["meta"][k],
                        batch["depth"][k].clone()))
    assert len(got) == len(rows)
    for (image, label, caption, meta, depth), row in zip(got, rows):
        data = (tmp_path / row["path"]).read_bytes()
        expect = np.frombuffer(feedline._C.transform_image(data, from_torchvision(tf)), np.uint8).reshape(3, 24, 24)
        assert torch.equal(image, torch.from_numpy(expect.copy()))
        assert (label, caption, meta) == (row["label"], row["caption"], row["meta"])
        assert torch.equal(depth, torch.from_numpy(np.load(tmp_path / row["depth"])))


def test_a_jsonl_list_with_every_kind(tmp_path):
    rows = _list_files(tmp_path)
    with open(tmp_path / "train.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
        f.write("\n")  # blank lines are allowed
    tf = T.Compose([T.Resize(24), T.CenterCrop(24), T.PILToTensor()])
    loader = feedline.Loader(tmp_path / "train.jsonl", batch_size=2, fields=LIST_FIELDS, transform=tf,
                             num_threads=2)
    _check_list_batches(loader, tmp_path, rows)


def test_a_csv_list_with_quotes_commas_and_newlines(tmp_path):
    import csv
    rows = _list_files(tmp_path)
    with open(tmp_path / "train.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["path", "label", "caption", "meta", "depth"])
        w.writeheader()
        for r in rows:
            w.writerow({**r, "meta": json.dumps(r["meta"])})
    tf = T.Compose([T.Resize(24), T.CenterCrop(24), T.PILToTensor()])
    loader = feedline.Loader(tmp_path / "train.csv", batch_size=3, fields=LIST_FIELDS, transform=tf)
    _check_list_batches(loader, tmp_path, rows)


def test_a_path_label_list_works_without_fields(tmp_path):
    rows = _list_files(tmp_path, 4)
    (tmp_path / "l.csv").write_text("path,label\n" + "".join(f"{r['path']},{r['label']}\n" for r in rows))
    tf = T.Compose([T.Resize(16), T.CenterCrop(16), T.PILToTensor()])
    ((images, labels),) = list(feedline.Loader(tmp_path / "l.csv", batch_size=4, transform=tf))
    assert labels.tolist() == [r["label"] for r in rows] and images.shape == (4, 3, 16, 16)


@pytest.mark.parametrize("text, reason", [
    ("path,label\na.jpg,1,extra\n", r"line 2: more cells than the header's 2"),
    ("path,label\n\"a.jpg,1\n", r"line 2: a quoted cell is never closed"),
    ("path,label\na.jpg,seven\n", r"line 2: label 'seven' is not an integer"),
    ("name,label\na.jpg,1\n", r"has no \"path\" column \(its columns: 'name', 'label'\)"),
])
def test_malformed_lists_name_the_line(tmp_path, text, reason):
    (tmp_path / "bad.csv").write_text(text)
    with pytest.raises(ValueError, match=r"bad\.csv.*" + reason):
        feedline.Loader(tmp_path / "bad.csv", batch_size=1)


@pytest.mark.parametrize("name, data, reason", [
    # The JSON parser stops at a NUL: without the check, '"label": 3' would vanish.
    ("bad.jsonl", b'{"path": "a.jpg"}\n{"path": "b.jpg"}\x00, "label": 3}\n',
     r"line 2: a NUL byte at offset 35 \(a list is a text file\)"),
    ("bad.csv", b"path,label\na.jpg,1\x00\n", r"line 2: a NUL byte at offset 18"),
    ("bad.jsonl", b"{}\n\n{}\n", r"its 2 rows are empty objects \(no column anywhere\)"),
])
def test_lists_that_are_not_text_or_hold_nothing_are_refused(tmp_path, name, data, reason):
    (tmp_path / name).write_bytes(data)
    with pytest.raises(ValueError, match=re.escape(name) + ".*" + reason):
        feedline.Loader(tmp_path / name, batch_size=1, fields={"p": "text:path"})


def test_a_missing_file_names_the_column_the_file_and_the_row(tmp_path):
    (tmp_path / "l.jsonl").write_text(json.dumps({"path": "nope.jpg", "caption": "x", "key": "row-0"}) + "\n")
    loader = feedline.Loader(tmp_path / "l.jsonl", batch_size=1, fields={"image": "image:path", "c": "text:caption"})
    with pytest.raises(feedline.Error, match=r"l\.jsonl.*key 'row-0'.*column 'path'.*nope\.jpg"):
        list(loader)
    loader.close()  # the traceback's frames would keep it open until collected


# -- packed shards, format 2 ----------------------------------------------------

def _pack(src, out, *extra):
    import os
    import subprocess
    r = subprocess.run([os.environ["FEEDLINE_BIN"], "pack", str(src), str(out), *extra], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    return r


def _epoch(loader):
    out = []
    for b in loader:
        out.append({k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in b.items()})
    return out


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            if isinstance(x[k], torch.Tensor):
                assert torch.equal(x[k], y[k]), k
            else:
                assert x[k] == y[k], k


def test_tars_pack_into_named_fields_and_load_the_same(wds, tmp_path):
    import feedline._C as C
    d, samples = wds
    _pack(d, tmp_path / "packed", "--shard-bytes", "20000")
    manifest = json.loads((tmp_path / "packed" / "manifest.json").read_text())
    assert manifest["records"] == len(samples) and len(manifest["shards"]) > 1
    assert C.source_kind(str(tmp_path / "packed").encode()) == "shards"
    tf = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToTensor()])
    kw = dict(batch_size=4, fields=FIELDS, transform=tf, shuffle=True, seed=3, num_threads=2)
    _same(_epoch(feedline.Loader(d, **kw)), _epoch(feedline.Loader(tmp_path / "packed", **kw)))
    # Without fields a version-2 shard still gives (image, label): its first field and its cls.
    ((images, labels),) = list(feedline.Loader(tmp_path / "packed", batch_size=10, transform=T.Compose(
        [T.Resize(16), T.CenterCrop(16), T.PILToTensor()])))
    assert labels.tolist() == [int(s[1]["cls"]) for s in samples]


def test_a_list_packs_with_its_file_columns(tmp_path):
    rows = _list_files(tmp_path)
    with open(tmp_path / "train.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    _pack(tmp_path / "train.jsonl", tmp_path / "packed", "--file-columns", "path,depth")
    tf = T.Compose([T.Resize(24), T.CenterCrop(24), T.PILToTensor()])
    kw = dict(batch_size=2, fields=LIST_FIELDS, transform=tf)
    _same(_epoch(feedline.Loader(tmp_path / "train.jsonl", **kw)), _epoch(feedline.Loader(tmp_path / "packed", **kw)))


def test_packing_a_list_names_a_missing_file_column(tmp_path):
    import os
    import subprocess
    rows = _list_files(tmp_path, 2)
    (tmp_path / "l.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = subprocess.run([os.environ["FEEDLINE_BIN"], "pack", str(tmp_path / "l.jsonl"), str(tmp_path / "o"),
                        "--file-columns", "path,nope"], capture_output=True, text=True)
    assert r.returncode != 0 and "the list has no column 'nope'" in r.stderr
