"""`feedline pack`, `verify` and `inspect` on real files (docs/reliability.md
1-8, 29-30 at the tool level), and loading packed data through the Python
loader."""
import hashlib
import json
import pathlib
import subprocess

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def folder(tmp_path_factory, gen_dataset):
    return gen_dataset(tmp_path_factory.mktemp("src") / "images", 120, 3)


def pack(feedline_bin, *args, check=True):
    proc = subprocess.run([feedline_bin, "pack", *map(str, args)], capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(proc.stderr)
    return proc


def digests(out):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.iterdir())}


def test_pack_is_deterministic_and_verifies(feedline_bin, folder, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    pack(feedline_bin, folder, a, "--shard-bytes", 1_000_000, "--threads", 1)
    pack(feedline_bin, folder, b, "--shard-bytes", 1_000_000, "--threads", 2)
    assert digests(a) == digests(b)
    assert len([p for p in a.iterdir() if p.suffix == ".fls"]) > 2
    v = subprocess.run([feedline_bin, "verify", str(a)], capture_output=True, text=True)
    assert v.returncode == 0 and "OK: 120 records" in v.stdout
    i = subprocess.run([feedline_bin, "inspect", str(a)], capture_output=True, text=True)
    assert i.returncode == 0 and "records 120" in i.stdout and "classes 3" in i.stdout


def test_packed_data_loads_like_the_folder(feedline_bin, folder, tmp_path):
    import feedline
    out = tmp_path / "packed"
    pack(feedline_bin, folder, out, "--shard-bytes", 500_000)
    x = feedline.Loader(folder, batch_size=16, shuffle=True, seed=4, num_threads=2)
    y = feedline.Loader(out, batch_size=16, shuffle=True, seed=4, num_threads=2)
    assert x.classes == y.classes and len(x) == len(y)
    for (xi, xl), (yi, yl) in zip(x, y):
        assert torch.equal(xi, yi) and torch.equal(xl, yl)


def test_non_empty_output_is_refused_unless_told(feedline_bin, folder, tmp_path):
    out = tmp_path / "out"
    pack(feedline_bin, folder, out)
    again = pack(feedline_bin, folder, out, check=False)
    assert again.returncode != 0 and "not empty" in again.stderr and "--overwrite" in again.stderr
    pack(feedline_bin, folder, out, "--overwrite")
    (out / "notes.txt").write_text("mine")
    foreign = pack(feedline_bin, folder, out, "--overwrite", check=False)
    assert foreign.returncode != 0 and "not feedline shards" in foreign.stderr


def test_resume_after_a_kill_gives_the_same_dataset(feedline_bin, folder, tmp_path):
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    pack(feedline_bin, folder, clean, "--shard-bytes", 1_000_000)
    pack(feedline_bin, folder, killed, "--shard-bytes", 1_000_000)
    # What SIGKILL leaves: a half-written shard, a missing one, no manifest.
    shards = sorted(killed.glob("*.fls"))
    shards[-1].unlink()
    (killed / (shards[-1].name + ".partial")).write_bytes(b"FLSHARD\0 half written")
    (killed / "manifest.json").unlink()
    refused = pack(feedline_bin, folder, killed, "--shard-bytes", 1_000_000, check=False)
    assert refused.returncode != 0
    pack(feedline_bin, folder, killed, "--shard-bytes", 1_000_000, "--resume")
    assert digests(killed) == digests(clean)


def test_parts_merge_into_the_same_records(feedline_bin, folder, tmp_path):
    import feedline
    out = tmp_path / "parts"
    for i in range(3):
        pack(feedline_bin, folder, out, "--part", f"{i}/3", "--shard-bytes", 1_000_000,
             *(["--resume"] if i else []))
    early = subprocess.run([feedline_bin, "pack", "--merge", str(tmp_path / "nothing")], capture_output=True, text=True)
    assert early.returncode != 0
    subprocess.run([feedline_bin, "pack", "--merge", str(out)], check=True, capture_output=True)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["records"] == 120
    assert subprocess.run([feedline_bin, "verify", str(out)], capture_output=True).returncode == 0
    x = feedline.Loader(folder, batch_size=40, num_threads=1, transform=feedline.transforms.imagenet_eval())
    y = feedline.Loader(out, batch_size=40, num_threads=1, transform=feedline.transforms.imagenet_eval())
    for (xi, _), (yi, _) in zip(x, y):
        assert torch.equal(xi, yi)


def test_verify_names_the_bad_record_and_fails(feedline_bin, folder, tmp_path):
    out = tmp_path / "bad"
    pack(feedline_bin, folder, out, "--shard-bytes", 1_000_000)
    shard = sorted(out.glob("*.fls"))[1]
    data = bytearray(shard.read_bytes())
    data[5000] ^= 0x01
    shard.write_bytes(bytes(data))
    v = subprocess.run([feedline_bin, "verify", str(out)], capture_output=True, text=True)
    assert v.returncode == 1
    lines = [l for l in v.stdout.splitlines() if l.startswith("BAD")]
    assert any(f"shard {shard.name} record" in l and "offset" in l and "checksum mismatch" in l
               for l in lines), v.stdout
    assert any("whole-file crc32c" in l for l in lines)


def test_a_shard_that_disagrees_with_the_manifest_is_named(feedline_bin, folder, tmp_path):
    import feedline
    out = tmp_path / "short"
    pack(feedline_bin, folder, out, "--shard-bytes", 1_000_000)
    shard = sorted(out.glob("*.fls"))[0]
    shard.write_bytes(shard.read_bytes()[:-100])
    with pytest.raises(feedline.Error, match=shard.name):
        feedline.Loader(out, batch_size=8)
    shard.unlink()
    with pytest.raises(FileNotFoundError, match=shard.name):
        feedline.Loader(out, batch_size=8)


def test_csv_and_jsonl_lists_pack_with_their_labels_and_keys(feedline_bin, folder, tmp_path):
    import feedline
    files = sorted(p for p in folder.rglob("*") if p.is_file())[:10]
    csv = tmp_path / "list.csv"
    csv.write_text("path,label,key\n" + "".join(f"{p},{i * 7},k{i}\n" for i, p in enumerate(files)))
    jsonl = tmp_path / "list.jsonl"
    jsonl.write_text("".join(json.dumps({"path": str(p), "label": i * 7, "key": f"k{i}"}) + "\n"
                             for i, p in enumerate(files)))
    for lst in (csv, jsonl):
        out = tmp_path / ("from_" + lst.suffix[1:])
        pack(feedline_bin, lst, out)
        loader = feedline.RecordLoader(out, batch_size=10, max_record_bytes=max(p.stat().st_size for p in files))
        batch = next(loader.batches())
        for j, sample in enumerate(batch.sample_ids):
            raw = files[sample].read_bytes()
            assert batch.fields["label"][j] == sample * 7
            assert bytes(batch.fields["bytes"][j, : len(raw)].numpy()) == raw
    bad = tmp_path / "bad.csv"
    bad.write_text("a.jpg,notanumber\n")
    r = pack(feedline_bin, bad, tmp_path / "x", check=False)
    assert r.returncode != 0 and "bad.csv line 1" in r.stderr
    # A label past int64 is an error, never a clamped label; so is one in JSONL.
    huge = tmp_path / "huge.csv"
    huge.write_text(f"{files[0]},99999999999999999999\n")
    r = pack(feedline_bin, huge, tmp_path / "h", check=False)
    assert r.returncode != 0 and "huge.csv line 1" in r.stderr and "int64" in r.stderr
    huge_json = tmp_path / "huge.jsonl"
    huge_json.write_text(json.dumps({"path": str(files[0]), "label": 2 ** 64 - 1}) + "\n")
    r = pack(feedline_bin, huge_json, tmp_path / "hj", check=False)
    assert r.returncode != 0 and "int64" in r.stderr
    # A first row whose path starts with "path" is data, not a header; CRLF lines are read.
    pathdir = tmp_path / "paths"
    pathdir.mkdir()
    first = pathdir / "a.jpg"
    first.write_bytes(files[0].read_bytes())
    crlf = tmp_path / "crlf.csv"
    crlf.write_bytes(f"paths/a.jpg,5\r\n{files[1]},6\r\n".encode())
    pack(feedline_bin, crlf, tmp_path / "c")
    loader = feedline.RecordLoader(tmp_path / "c", batch_size=2, max_record_bytes=1 << 20)
    assert next(loader.batches()).fields["label"].tolist() == [5, 6]
    empty = tmp_path / "empty.csv"
    empty.write_text("path,label\n")
    r = pack(feedline_bin, empty, tmp_path / "e", check=False)
    assert r.returncode != 0 and "holds no entries" in r.stderr


@pytest.fixture
def small_disk(tmp_path):
    """A real 1 MiB tmpfs (docs/reliability.md 29); needs root, as the tests run."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs for the disk-full test: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_full_disk_names_the_file_and_leaves_no_complete_looking_output(feedline_bin, folder, small_disk):
    out = small_disk / "packed"
    r = pack(feedline_bin, folder, out, "--shard-bytes", 300_000, check=False)
    assert r.returncode != 0
    assert "disk full" in r.stderr and ".fls.partial" in r.stderr, r.stderr
    assert not (out / "manifest.json").exists()
    # Shards that made it are complete (renamed only after footer and fsync);
    # the failed .partial is gone.
    assert list(out.glob("*.fls")), "some shards should fit in 1 MiB"
    for shard in out.glob("*.fls"):
        assert shard.read_bytes()[-8:] == b"FLSHEND\0", shard
    assert not list(out.glob("*.partial"))


def test_read_ahead_changes_nothing_but_counts_against_the_budget(feedline_bin, folder, tmp_path):
    import feedline
    out = tmp_path / "ra"
    pack(feedline_bin, folder, out, "--shard-bytes", 500_000)
    plain = feedline.Loader(out, batch_size=16, shuffle=True, seed=2, num_threads=2, read_ahead_bytes=0)
    ahead = feedline.Loader(out, batch_size=16, shuffle=True, seed=2, num_threads=2,
                            read_ahead_bytes=1 << 20, read_ahead_threads=3)
    for _ in range(2):  # two epochs: the plan is handed over again at the boundary
        for (a, la), (b, lb) in zip(plain, ahead):
            assert torch.equal(a, b) and torch.equal(la, lb)
    ahead.set_epoch(5)
    plain.set_epoch(5)
    for (a, _), (b, _) in zip(plain, ahead):
        assert torch.equal(a, b)
    with pytest.raises(feedline.ResourceError, match="reserved bytes \\(read-ahead\\)"):
        feedline.Loader(out, batch_size=16, max_bytes=1 << 20, read_ahead_bytes=1 << 20)


def records(out):
    """Every record's bytes and label, in order, through RecordLoader."""
    import feedline
    got = []
    for data, lengths, labels in feedline.RecordLoader(out, batch_size=16, shuffle=False, num_threads=1,
                                                       max_record_bytes=4 << 20):
        for row, n, label in zip(data, lengths, labels):
            got.append((bytes(row[:int(n)].numpy().tobytes()), int(label)))
    return got


def has_dri(jpeg):
    """True if the JPEG's header holds a restart interval (DRI, FFDD)."""
    i = 2
    while i + 4 <= len(jpeg) and jpeg[i] == 0xFF:
        marker, length = jpeg[i + 1], int.from_bytes(jpeg[i + 2:i + 4], "big")
        if marker == 0xDD:
            return int.from_bytes(jpeg[i + 4:i + 6], "big") > 0
        if marker == 0xDA:
            return False
        i += 2 + length
    return False


def test_restart_intervals_change_no_pixel_and_are_recorded(feedline_bin, folder, tmp_path):
    import feedline
    plain, marked = tmp_path / "plain", tmp_path / "marked"
    pack(feedline_bin, folder, plain)
    proc = pack(feedline_bin, folder, marked, "--restart-interval", 4)
    jpegs = sum(p.read_bytes()[:3] == b"\xff\xd8\xff" for p in folder.rglob("*") if p.is_file())
    assert 0 < jpegs < 120  # the generated folder mixes in some PNGs
    assert f"transcoded with restart markers {jpegs} ({120 - jpegs} not JPEG)" in proc.stdout
    assert "as they were 0" in proc.stdout
    manifest = json.loads((marked / "manifest.json").read_text())
    assert manifest["pack"] == {"restart_interval": 4}
    assert "pack" not in json.loads((plain / "manifest.json").read_text())  # off: manifest as before
    assert sum(has_dri(r) for r, _ in records(marked)) == jpegs
    assert not any(has_dri(r) for r, _ in records(plain))
    # Train crops (DCT-scaled) and eval crops decode to identical tensors.
    for transform in (feedline.transforms.imagenet_train(), feedline.transforms.imagenet_eval()):
        x = feedline.Loader(plain, batch_size=16, shuffle=True, seed=3, num_threads=2, transform=transform)
        y = feedline.Loader(marked, batch_size=16, shuffle=True, seed=3, num_threads=2, transform=transform)
        for (xi, xl), (yi, yl) in zip(x, y):
            assert torch.equal(xi, yi) and torch.equal(xl, yl)
    v = subprocess.run([feedline_bin, "verify", str(marked)], capture_output=True, text=True)
    assert v.returncode == 0, v.stdout + v.stderr


def test_max_side_resizes_only_larger_images_like_pil(feedline_bin, folder, tmp_path):
    import io

    import numpy
    from PIL import Image
    plain, small = tmp_path / "plain", tmp_path / "small"
    pack(feedline_bin, folder, plain)
    proc = pack(feedline_bin, folder, small, "--max-side", 300, "--quality", 95)
    manifest = json.loads((small / "manifest.json").read_text())
    assert manifest["pack"] == {"max_side": 300, "quality": 95}
    resized = 0
    for (before, label_a), (after, label_b) in zip(records(plain), records(small)):
        assert label_a == label_b
        a, b = Image.open(io.BytesIO(before)), Image.open(io.BytesIO(after))
        if max(a.size) <= 300:
            assert before == after  # untouched, byte for byte
            continue
        resized += 1
        assert b.format == a.format and max(b.size) == 300
        assert abs(b.size[0] / b.size[1] - a.size[0] / a.size[1]) < 0.02
        want = numpy.asarray(a.convert("RGB").resize(b.size, Image.BICUBIC), dtype=numpy.float64)
        assert numpy.abs(numpy.asarray(b.convert("RGB"), dtype=numpy.float64) - want).mean() < 3.0
    assert resized > 0 and f"resized {resized}," in proc.stdout


def test_pack_options_are_checked_and_kept_by_merge(feedline_bin, folder, tmp_path):
    bad = pack(feedline_bin, folder, tmp_path / "q", "--quality", 80, check=False)
    assert bad.returncode != 0 and "--max-side" in bad.stderr
    bad = pack(feedline_bin, folder, tmp_path / "r", "--restart-interval", 70000, check=False)
    assert bad.returncode != 0 and "65535" in bad.stderr
    out = tmp_path / "parts"
    for i in range(2):
        pack(feedline_bin, folder, out, "--part", f"{i}/2", "--restart-interval", 1, *(["--resume"] if i else []))
    pack(feedline_bin, "--merge", out)
    assert json.loads((out / "manifest.json").read_text())["pack"] == {"restart_interval": 1}
    other = tmp_path / "mixed"
    pack(feedline_bin, folder, other, "--part", "0/2", "--restart-interval", 1)
    pack(feedline_bin, folder, other, "--part", "1/2", "--resume")
    mixed = pack(feedline_bin, "--merge", other, check=False)
    assert mixed.returncode != 0 and "other options" in mixed.stderr


def test_resume_refuses_shards_packed_with_other_options(feedline_bin, folder, tmp_path):
    out = tmp_path / "out"
    pack(feedline_bin, folder, out, "--shard-bytes", 1_000_000, "--restart-interval", 4)
    assert [p.name for p in out.iterdir() if p.name.endswith(".options")] == []  # the manifest says it
    # A finished pack: its manifest names the options.
    other = pack(feedline_bin, folder, out, "--shard-bytes", 1_000_000, "--resume", check=False)
    assert other.returncode != 0 and "restart_interval" in other.stderr and "--overwrite" in other.stderr
    pack(feedline_bin, folder, out, "--shard-bytes", 1_000_000, "--resume", "--restart-interval", 4)
    # What SIGKILL leaves: shards, the options file written before them, no manifest.
    (out / "manifest.json").unlink()
    (out / "manifest.json.options").write_text(json.dumps({"restart_interval": 4}) + "\n")
    other = pack(feedline_bin, folder, out, "--shard-bytes", 1_000_000, "--resume", "--restart-interval", 8,
                 check=False)
    assert other.returncode != 0 and "manifest.json.options" in other.stderr
    pack(feedline_bin, folder, out, "--shard-bytes", 1_000_000, "--resume", "--restart-interval", 4)
    assert json.loads((out / "manifest.json").read_text())["pack"] == {"restart_interval": 4}
