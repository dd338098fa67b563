"""Parquet, Arrow IPC and Arrow tables as sources (docs/columnar.md), with
real files written by pyarrow in the Hugging Face Hub's layout (images as
{bytes, path} structs, int labels, string captions): the same batches as
the same JPEGs in an image folder, fields by column, a grouped shuffle that
resumes exactly, ranks disjoint, a datasets-style save_to_disk folder and an
in-memory table read in place, a bucket copy through a real S3 server, and
bad input named by file, row group, row and column."""
import json
import pathlib

import pytest
import torch

pa = pytest.importorskip("pyarrow", reason="FEEDLINE_PYARROW_DIR (make test sets it) has no pyarrow")
import pyarrow.parquet as pq  # noqa: E402

import feedline  # noqa: E402
from feedline import _C  # noqa: E402

pytestmark = pytest.mark.skipif(not _C.columnar_supported(), reason="built without Arrow (cmake/FeedlineArrow.cmake)")


def _images(folder):
    """(path relative to the folder, bytes, class index) in ImageFolder order."""
    classes = sorted(p.name for p in pathlib.Path(folder).iterdir() if p.is_dir())
    out = []
    for ci, c in enumerate(classes):
        for f in sorted((pathlib.Path(folder) / c).iterdir()):
            out.append((f"{c}/{f.name}", f.read_bytes(), ci))
    return classes, out


def _hub_table(rows, classes):
    image = pa.array([{"bytes": b, "path": p} for p, b, _ in rows],
                     type=pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
    features = {"image": {"_type": "Image"}, "label": {"names": classes, "_type": "ClassLabel"}}
    schema = pa.schema([("image", image.type), ("label", pa.int64()), ("caption", pa.string()),
                        ("box", pa.list_(pa.float32(), 4))],
                       metadata={"huggingface": json.dumps({"info": {"features": features}})})
    return pa.Table.from_arrays(
        [image, pa.array([c for _, _, c in rows], pa.int64()),
         pa.array([f"a photo of {p}" for p, _, _ in rows]),
         pa.array([[float(i), 1.0, 2.0, 3.5] for i in range(len(rows))], pa.list_(pa.float32(), 4))],
        schema=schema)


@pytest.fixture(scope="module")
def hub(tmp_path_factory, gen_dataset):
    """48 JPEGs in 4 classes as a folder and as 3 Parquet shards (row groups of 5)."""
    base = tmp_path_factory.mktemp("hub")
    folder = gen_dataset(base / "folder", 48, 4)
    classes, rows = _images(folder)
    table = _hub_table(rows, classes)
    data = base / "data"
    data.mkdir()
    for i, (lo, hi) in enumerate([(0, 16), (16, 35), (35, 48)]):
        pq.write_table(table.slice(lo, hi - lo), data / f"train-{i:05d}-of-00003.parquet", row_group_size=5)
    return folder, data, classes, rows


def _native():
    return feedline.transforms.imagenet_eval(64)


def test_parquet_shards_give_the_batches_of_the_same_images_as_files(hub):
    folder, data, classes, _ = hub
    files = feedline.Loader(folder, batch_size=8, transform=_native(), num_threads=2)
    parquet = feedline.Loader(data, batch_size=8, transform=_native(), num_threads=2)
    assert parquet._loader.source_kind == "columnar"
    assert parquet.classes == classes == files.classes
    assert len(parquet) == len(files) == 6
    for (a, la), (b, lb) in zip(files, parquet):
        assert torch.equal(a, b) and torch.equal(la, lb)


def test_columns_are_fields_by_their_arrow_type(hub):
    _, data, _, rows = hub
    loader = feedline.Loader(data, batch_size=8, transform=_native(), num_threads=2,
                             fields={"image": "image", "label": "label", "caption": "caption", "box": "box"})
    kinds = {f.name: f.kind for f in loader.fields}
    assert kinds == {"image": "image", "label": "label", "caption": "text", "box": "ndarray"}
    batch = next(iter(loader))
    assert batch["image"].shape == (8, 3, 64, 64)
    assert batch["label"].tolist() == [c for _, _, c in rows[:8]]
    assert batch["caption"] == [f"a photo of {p}" for p, _, _ in rows[:8]]
    assert batch["box"].dtype == torch.float32 and batch["box"].shape == (8, 4)
    assert batch["box"][3].tolist() == [3.0, 1.0, 2.0, 3.5]
    # A field naming no column says which columns there are.
    with pytest.raises(ValueError, match=r"no column named 'picture'.*caption \(string\)"):
        feedline.Loader(data, batch_size=8, fields={"image": "picture"})


def test_grouped_shuffle_covers_every_row_resumes_exactly_and_splits_ranks(hub):
    _, data, _, _ = hub

    def make(**kw):
        return feedline.Loader(data, batch_size=4, shuffle=True, seed=3, transform=_native(), num_threads=2,
                               shuffle_window=2, **kw)

    labels = [lb for _, lb in make()]
    assert sum(len(lb) for lb in labels) == 48
    loader = make()
    it = iter(loader)
    for _ in range(5):
        next(it)
    state = loader.state_dict()
    rest = [lb for _, lb in it]
    resumed = make()
    resumed.load_state_dict(state)
    again = [lb for _, lb in resumed]
    assert len(again) == len(rest) == 7
    assert all(torch.equal(a, b) for a, b in zip(rest, again))
    # Another window is another order: refused, not silently resumed.
    other = feedline.Loader(data, batch_size=4, shuffle=True, seed=3, transform=_native(), num_threads=2,
                            shuffle_window=3)
    with pytest.raises(Exception, match="fingerprint"):
        other.load_state_dict(state)
    # Two ranks: disjoint halves whose interleaving is the one-rank order.
    ids = [make(rank=r, world_size=2, fields={"label": "label"}) for r in (0, 1)]
    r0 = [int(x) for b in ids[0] for x in b["label"]]
    r1 = [int(x) for b in ids[1] for x in b["label"]]
    assert len(r0) == len(r1) == 24
    flat = [int(x) for lb in labels for x in lb]
    assert [flat[i] for i in range(0, 48, 2)] == r0 and [flat[i] for i in range(1, 48, 2)] == r1


def test_save_to_disk_folder_and_in_memory_table_read_in_place(hub, tmp_path):
    _, data, classes, rows = hub
    table = pq.read_table(data)
    # datasets' save_to_disk layout: Arrow IPC stream files named in state.json.
    saved = tmp_path / "saved"
    saved.mkdir()
    names = []
    for i, (lo, hi) in enumerate([(0, 30), (30, 48)]):
        name = f"data-{i:05d}-of-00002.arrow"
        with pa.OSFile(str(saved / name), "wb") as f, pa.ipc.new_stream(f, table.schema) as w:
            w.write_table(table.slice(lo, hi - lo), max_chunksize=7)
        names.append({"filename": name})
    (saved / "state.json").write_text(json.dumps({"_data_files": names, "_split": "train"}))
    (saved / "dataset_info.json").write_text("{}")
    ref = [(a, la) for a, la in feedline.Loader(data, batch_size=8, transform=_native(), num_threads=1)]
    for source in (saved, table):
        got = [(a, la) for a, la in feedline.Loader(source, batch_size=8, transform=_native(), num_threads=2)]
        assert len(got) == len(ref)
        assert all(torch.equal(a, b) and torch.equal(la, lb) for (a, la), (b, lb) in zip(ref, got))
    loader = feedline.Loader(table, batch_size=8, transform=_native(), num_threads=2)
    assert loader.classes == classes
    del table  # the engine holds the buffers it reads
    assert sum(len(lb) for _, lb in loader) == 48


def test_a_hf_dataset_is_read_through_its_arrow_table(hub):
    datasets = pytest.importorskip("datasets", reason="datasets is in the torch 2 venv (make test-torch2)")
    _, data, classes, rows = hub
    ds = datasets.load_dataset("parquet", data_files=sorted(str(p) for p in data.iterdir()), split="train")
    ref = [la for _, la in feedline.Loader(data, batch_size=8, transform=_native(), num_threads=1)]
    got = [la for _, la in feedline.Loader(ds, batch_size=8, transform=_native(), num_threads=2)]
    assert all(torch.equal(a, b) for a, b in zip(ref, got)) and len(got) == len(ref)
    # select() makes an indices mapping: applied, in its order.
    picked = ds.select([5, 1, 40])
    labels = [int(x) for _, lb in feedline.Loader(picked, batch_size=3, transform=_native()) for x in lb]
    assert labels == [rows[5][2], rows[1][2], rows[40][2]]
    with pytest.raises(TypeError, match="one split"):
        feedline.Loader(datasets.DatasetDict({"train": ds}), batch_size=8)


def test_bad_rows_name_file_row_group_row_and_column_and_are_skipped_and_counted(hub, tmp_path):
    _, _, classes, rows = hub
    table = _hub_table(rows[:20], classes)
    # Row 7's image has no bytes (a path only): that row's error, the rest load.
    image = table.column("image").to_pylist()
    image[7] = {"bytes": None, "path": "lost.jpg"}
    table = table.set_column(0, "image", pa.array(image, type=table.schema.field("image").type))
    pq.write_table(table, tmp_path / "bad.parquet", row_group_size=5)
    with pytest.raises(Exception, match=r"bad.parquet', row group 1, row 7, column 'image': its 'bytes' is null"):
        list(feedline.Loader(tmp_path / "bad.parquet", batch_size=4, transform=_native()))
    loader = feedline.Loader(tmp_path / "bad.parquet", batch_size=4, transform=_native(), max_errors=5)
    assert sum(len(lb) for _, lb in loader) == 19
    assert loader.stats()["errors"]["skipped"] == 1
    # A truncated file: its name and what is wrong, at open.
    whole = (tmp_path / "bad.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(Exception, match="cut.parquet"):
        feedline.Loader(tmp_path / "cut.parquet", batch_size=4)
    # A label column of the wrong type, with and without fields.
    pq.write_table(table.set_column(1, "label", pa.array([i / 2 for i in range(20)])), tmp_path / "f.parquet")
    with pytest.raises(Exception, match=r"label column 'label' \(double\) is not an integer column"):
        feedline.Loader(tmp_path / "f.parquet", batch_size=4)
    with pytest.raises(ValueError, match="column 'label' has type double, which no field kind reads"):
        feedline.Loader(tmp_path / "f.parquet", batch_size=4, fields={"image": "image", "label": "label"})
