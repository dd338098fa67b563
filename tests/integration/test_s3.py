"""Object stores (src/io/s3/, docs/object_stores.md) against a real
S3-compatible server on 127.0.0.1 (moto's, tests/integration/s3_server.py):
a packed dataset and a WebDataset tar in a bucket load exactly like the
local copies; our uploads (multipart included) read back byte for byte with
boto3; missing objects and buckets and bad credentials are errors naming the
URL and S3's code, before the first batch; a proxy that answers 503
SlowDown, resets connections or cuts bodies short is survived with every
sample delivered exactly once."""
import os
import pathlib

import pytest
import torch
from s3_server import FaultProxy, Moto, venv

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(venv() is None, reason="FEEDLINE_S3_VENV (make test sets it) has no moto_server")


@pytest.fixture(scope="module")
def moto():
    server = Moto()
    old = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION",
                                          "AWS_ENDPOINT_URL", "AWS_EC2_METADATA_DISABLED", "AWS_CONFIG_FILE",
                                          "AWS_SHARED_CREDENTIALS_FILE", "AWS_PROFILE")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1",
                      AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE="/nonexistent",
                      AWS_SHARED_CREDENTIALS_FILE="/nonexistent")
    os.environ.pop("AWS_PROFILE", None)
    server.boto("s3.create_bucket(Bucket='data')")
    yield server
    server.close()
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def http(endpoint, attempts=4):
    import feedline._C as C
    h = C.HttpOptions()
    h.s3.endpoint_url = endpoint
    h.max_attempts = attempts
    h.initial_backoff_ms = 1
    return h


@pytest.fixture(scope="module")
def uploaded(moto, packed):
    import feedline._C as C
    C.upload_directory(str(packed / "www" / "ds"), "s3://data/ds", "manifest.json", http(moto.url))
    return packed / "www" / "ds"


def test_a_packed_dataset_in_a_bucket_loads_like_the_local_copy(moto, uploaded):
    import feedline
    local = feedline.Loader(uploaded, batch_size=16, shuffle=True, seed=8, num_threads=2)
    remote = feedline.Loader("s3://data/ds", batch_size=16, shuffle=True, seed=8, num_threads=2,
                             endpoint_url=moto.url)
    assert remote.classes == local.classes and len(remote) == len(local)
    for (a, la), (b, lb) in zip(local, remote):
        assert torch.equal(a, b) and torch.equal(la, lb)


def test_uploads_read_back_byte_for_byte_with_boto3_and_list_in_order(moto, uploaded, tmp_path):
    import feedline._C as C
    big = tmp_path / "big" / "blob.bin"
    big.parent.mkdir()
    data = os.urandom(11 << 20)  # over two 5 MiB parts: a multipart upload
    big.write_bytes(data)
    h = http(moto.url)
    h.s3.part_bytes = 5 << 20
    C.upload_directory(str(big.parent), "s3://data/big/", "", h)
    digest = moto.boto("import hashlib; print(hashlib.sha256(s3.get_object(Bucket='data', Key='big/blob.bin')"
                       "['Body'].read()).hexdigest())").strip()
    import hashlib
    assert digest == hashlib.sha256(data).hexdigest()
    assert C.read_object("s3://data/big/blob.bin", 1 << 30, h) == data
    listed = C.list_objects("s3://data/ds/", h)
    keys = [k for k, _, _ in listed]
    local = sorted(p.relative_to(uploaded).as_posix() for p in uploaded.rglob("*") if p.is_file())
    assert keys == ["ds/" + k for k in local]
    assert all(size == (uploaded / k[3:]).stat().st_size for k, size, _ in listed)


@pytest.mark.parametrize("fault", [None, "cut", "503"])
def test_a_large_read_in_concurrent_parts_is_whole_and_in_order(moto, tmp_path, fault):
    import feedline._C as C
    data = os.urandom(21 << 20)
    (tmp_path / "big.bin").write_bytes(data)
    moto.boto(f"s3.upload_file('{tmp_path / 'big.bin'}', 'data', 'parts/big.bin')")
    proxy = FaultProxy(moto.port)
    try:
        proxy.fault, proxy.every = fault, 4
        h = http(proxy.url, attempts=6)
        h.s3.part_bytes = 4 << 20  # six parts, four in flight
        h.s3.max_concurrency = 4
        before = C.object_store_stats()
        assert C.read_file("s3://data/parts/big.bin", 0, -1, h) == data
        assert C.read_file("s3://data/parts/big.bin", 5 << 20, 9 << 20, h) == data[5 << 20:14 << 20]
        gets = C.object_store_stats()["gets"] - before["gets"]
        assert gets >= 2 + 1  # split into parts (the part size may follow what was measured)
        if fault:
            assert proxy.injected > 0
    finally:
        proxy.close()


def test_listing_follows_every_page(moto):
    import feedline._C as C
    moto.boto("for i in range(1203): s3.put_object(Bucket='data', Key=f'many/{i:05d}', Body=b'x')")
    keys = [k for k, _, _ in C.list_objects("s3://data/many/", http(moto.url))]
    assert keys == [f"many/{i:05d}" for i in range(1203)]


def test_missing_objects_buckets_and_bad_keys_name_the_url_and_s3_code(moto, uploaded):
    import feedline
    import feedline._C as C
    with pytest.raises(FileNotFoundError, match=r"s3://data/nothing/' holds no objects"):
        feedline.Loader("s3://data/nothing", batch_size=4, endpoint_url=moto.url)
    with pytest.raises(Exception, match=r"s3://no-such-bucket.*NoSuchBucket"):
        C.list_objects("s3://no-such-bucket/x", http(moto.url))
    with pytest.raises(FileNotFoundError, match=r"s3://data/ds/missing.bin.*NoSuchKey"):
        C.read_object("s3://data/ds/missing.bin", 10, http(moto.url))
    bad = http(moto.url)
    bad.s3.profile = "nobody"
    with pytest.raises(Exception, match=r"ResourceExhausted|larger than the 10-byte limit"):
        C.read_object("s3://data/ds/manifest.json", 10, http(moto.url))


def test_a_webdataset_tar_in_a_bucket_loads_like_the_local_file(moto, packed, tmp_path):
    import io
    import tarfile

    import feedline
    tar = tmp_path / "train-000.tar"
    with tarfile.open(tar, "w") as tf:
        classes = sorted(p for p in (packed / "images").iterdir() if p.is_dir())
        for label, cls in enumerate(classes):
            for n, img in enumerate(sorted(cls.iterdir())):
                key = f"{cls.name}_{n:04d}"
                tf.add(img, arcname=key + ".jpg")
                info = tarfile.TarInfo(key + ".cls")
                info.size = len(str(label))
                tf.addfile(info, io.BytesIO(str(label).encode()))
    moto.boto(f"s3.upload_file('{tar}', 'data', 'tars/{tar.name}')")
    local = feedline.Loader(tar, batch_size=4, num_threads=2)
    remote = feedline.Loader(f"s3://data/tars/{tar.name}", batch_size=4, num_threads=2, endpoint_url=moto.url)
    assert len(remote) == len(local) == 20  # batches of 4
    for (a, la), (b, lb) in zip(local, remote):
        assert torch.equal(a, b) and torch.equal(la, lb)


@pytest.fixture(scope="module")
def folder(moto, packed):
    """The ImageFolder tree under s3://data/folder/ (<class>/<image> keys)."""
    import feedline._C as C
    C.upload_directory(str(packed / "images"), "s3://data/folder", "", http(moto.url))
    return packed / "images"


def test_an_image_folder_prefix_loads_like_the_local_folder_and_resumes_from_it(moto, folder):
    import feedline
    local = feedline.Loader(folder, batch_size=8, shuffle=True, seed=5, num_threads=2)
    remote = feedline.Loader("s3://data/folder/", batch_size=8, shuffle=True, seed=5, num_threads=2,
                             endpoint_url=moto.url)
    assert remote.classes == local.classes == sorted(p.name for p in folder.iterdir())
    assert remote._loader.source_kind == "folder"
    assert len(remote) == len(local) == 10
    for (a, la), (b, lb) in zip(local, remote):
        assert torch.equal(a, b) and torch.equal(la, lb)
    # A state saved on the local folder resumes on its copy in the bucket
    # (the listing's fingerprint has no ETags or sizes).
    it = iter(local)
    next(it), next(it)
    state = local.state_dict()
    rest = [la for _, la in it]
    resumed = feedline.Loader("s3://data/folder", batch_size=8, shuffle=True, seed=5, num_threads=2,
                              endpoint_url=moto.url)
    resumed.load_state_dict(state)
    again = [lb for _, lb in resumed]
    assert len(again) == len(rest) == 8
    assert all(torch.equal(a, b) for a, b in zip(rest, again))


def test_a_replaced_object_is_an_error_not_a_mix(moto, packed, tmp_path):
    import feedline
    import feedline._C as C
    C.upload_directory(str(packed / "images"), "s3://data/swap", "", http(moto.url))
    loader = feedline.Loader("s3://data/swap", batch_size=8, num_threads=1, endpoint_url=moto.url,
                             read_ahead_bytes=0)
    # The last sample: the ring (a few batches) cannot have read it yet.
    last = sorted((packed / "images").iterdir())[-1]
    victim = sorted(last.iterdir())[-1]
    moto.boto(f"s3.put_object(Bucket='data', Key='swap/{last.name}/{victim.name}', Body=b'changed')")
    with pytest.raises(Exception, match=r"swap/.*changed since it was listed"):
        for _ in loader:
            pass


def test_tar_patterns_and_prefixes_of_tars_load_like_the_local_directory(moto, packed, tmp_path):
    import feedline
    tars = _tars(packed, tmp_path / "tars", 3)
    for t in tars:
        moto.boto(f"s3.upload_file('{t}', 'data', 'shards/{t.name}')")
    local = [lb for _, lb in feedline.Loader(tmp_path / "tars", batch_size=4, num_threads=2)]
    for source in ("s3://data/shards/train-{000..002}.tar", "s3://data/shards/", "s3://data/shards"):
        loader = feedline.Loader(source, batch_size=4, num_threads=2, endpoint_url=moto.url)
        assert loader._loader.source_kind == "tar"
        remote = [lb for _, lb in loader]
        assert len(remote) == len(local) == 20
        assert all(torch.equal(a, b) for a, b in zip(local, remote)), source
    with pytest.raises(FileNotFoundError, match=r"train-003.tar.*NoSuchKey"):
        feedline.Loader("s3://data/shards/train-{000..003}.tar", batch_size=4, endpoint_url=moto.url)


def test_lists_of_s3_objects_load_like_the_local_list(moto, folder, tmp_path):
    import feedline
    rows = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.jpg"))
    labels = {c: i for i, c in enumerate(sorted(p.name for p in folder.iterdir()))}
    (tmp_path / "local.csv").write_text(
        "path,label\n" + "".join(f"{folder / r},{labels[r.split('/')[0]]}\n" for r in rows))
    # Absolute s3:// rows in a local list; relative rows in a list in the bucket.
    (tmp_path / "remote.csv").write_text(
        "path,label\n" + "".join(f"s3://data/folder/{r},{labels[r.split('/')[0]]}\n" for r in rows))
    (tmp_path / "train.csv").write_text(
        "path,label\n" + "".join(f"{r},{labels[r.split('/')[0]]}\n" for r in rows))
    moto.boto(f"s3.upload_file('{tmp_path / 'train.csv'}', 'data', 'folder/train.csv')")
    want = [(a, la) for a, la in feedline.Loader(tmp_path / "local.csv", batch_size=8, num_threads=2)]
    for source in (tmp_path / "remote.csv", "s3://data/folder/train.csv"):
        got = [(a, la) for a, la in feedline.Loader(source, batch_size=8, num_threads=2, endpoint_url=moto.url)]
        assert len(got) == len(want) == 10
        for (a, la), (b, lb) in zip(want, got):
            assert torch.equal(a, b) and torch.equal(la, lb)


def _tars(packed, out, n):
    """The packed images as n WebDataset tars (jpg + cls members) -> paths."""
    import io
    import tarfile
    out.mkdir()
    classes = sorted(p for p in (packed / "images").iterdir() if p.is_dir())
    samples = [(label, img) for label, cls in enumerate(classes) for img in sorted(cls.iterdir())]
    paths = []
    for t in range(n):
        path = out / f"train-{t:03d}.tar"
        with tarfile.open(path, "w") as tf:
            for k, (label, img) in enumerate(samples[t::n]):
                key = f"s{t}_{k:04d}"
                tf.add(img, arcname=key + ".jpg")
                info = tarfile.TarInfo(key + ".cls")
                info.size = len(str(label))
                tf.addfile(info, io.BytesIO(str(label).encode()))
        paths.append(path)
    return paths


@pytest.mark.parametrize("source", ["shards", "folder"])
@pytest.mark.parametrize("fault", ["503", "reset", "cut"])
def test_every_fault_of_the_proxy_is_survived_with_every_sample_once(moto, uploaded, folder, fault, source):
    import feedline
    proxy = FaultProxy(moto.port)
    try:
        local = feedline.Loader(uploaded if source == "shards" else folder, batch_size=8, shuffle=True, seed=3,
                                num_threads=2)
        proxy.fault, proxy.every = fault, 3
        remote = feedline.Loader("s3://data/ds" if source == "shards" else "s3://data/folder", batch_size=8,
                                 shuffle=True, seed=3, num_threads=2, endpoint_url=proxy.url, http_retries=6)
        got = [(a, la) for a, la in remote]
        want = [(a, la) for a, la in local]
        assert len(got) == len(want)
        for (a, la), (b, lb) in zip(want, got):
            assert torch.equal(a, b) and torch.equal(la, lb)
        assert proxy.injected > 0
    finally:
        proxy.close()


def test_the_doctor_tells_a_store_bound_loop_and_prescribes_read_ahead(moto, folder):
    """30 ms before every answer and no read-ahead: each sample waits for its
    GET. The doctor names the store (latency, requests per sample, concurrency
    in use) and prescribes the read-ahead that Little's law says hides it."""
    import feedline
    import feedline.doctor
    proxy = FaultProxy(moto.port)
    proxy.delay_s = 0.03
    try:
        loader = feedline.Loader("s3://data/folder", batch_size=8, num_threads=1, endpoint_url=proxy.url,
                                 read_ahead_bytes=0)
        with feedline.doctor.Doctor() as doctor:
            for _ in doctor.watch(loader):
                pass
            report = doctor.report(file=None)
    finally:
        proxy.close()
    store = report.data["feedline"]["object_store"]
    assert store["gets"] >= 64 and store["first_byte_s"] >= 0.03 and store["concurrency"] <= 1.5
    found = {f["id"]: f for f in report.findings}
    assert "storage_bound" in found, [f["id"] for f in report.findings]
    f = found["storage_bound"]
    assert f["evidence"]["recommended_read_ahead_threads"] > 1
    assert "read_ahead_threads=" in f["fix"] and f["predicted_speedup"] > 1


def test_feedline_pack_writes_a_dataset_into_a_bucket_shard_by_shard(moto, folder, feedline_bin, tmp_path):
    import subprocess

    import feedline
    import feedline._C as C
    env = dict(os.environ, AWS_ENDPOINT_URL=moto.url)
    staging = tmp_path / "staging"

    def pack(*extra):
        return subprocess.run([feedline_bin, "pack", str(folder), "s3://data/packed", "--shard-bytes", "300000",
                               "--threads", "2", "--staging", str(staging), *extra],
                              capture_output=True, text=True, env=env)
    p = pack()
    assert p.returncode == 0, p.stderr
    assert "s3://data/packed/manifest.json" in p.stdout
    assert not staging.exists()  # made by the run, removed by it
    keys = [k for k, _, _ in C.list_objects("s3://data/packed/", http(moto.url))]
    import json
    manifest = json.loads(C.read_object("s3://data/packed/manifest.json", 1 << 20, http(moto.url)))
    shards = [s["name"] for s in manifest["shards"]]
    assert len(shards) > 2 and sorted(keys) == sorted(["packed/manifest.json"] + ["packed/" + s for s in shards])
    local = feedline.Loader(folder, batch_size=8, shuffle=True, seed=2, num_threads=2)
    remote = feedline.Loader("s3://data/packed", batch_size=8, shuffle=True, seed=2, num_threads=2,
                             endpoint_url=moto.url)
    assert remote._loader.source_kind == "shards"
    for (a, la), (b, lb) in zip(local, remote):
        assert torch.equal(a, b) and torch.equal(la, lb)
    # A prefix holding a dataset is refused unless --overwrite, which
    # deletes the old shards the new manifest does not name.
    again = pack()
    assert again.returncode != 0 and "--overwrite" in again.stderr
    p = subprocess.run([feedline_bin, "pack", str(folder), "s3://data/packed", "--overwrite"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    keys = [k for k, _, _ in C.list_objects("s3://data/packed/", http(moto.url))]
    assert keys == ["packed/manifest.json", "packed/shard-00000.fls"]
    # A prefix holding other objects is never packed into.
    other = subprocess.run([feedline_bin, "pack", str(folder), "s3://data/folder"], capture_output=True, text=True,
                           env=env)
    assert other.returncode != 0 and "not feedline shards" in other.stderr


def test_pack_text_writes_token_shards_into_a_bucket(moto, tmp_path, monkeypatch):
    tokenizers = pytest.importorskip("tokenizers")
    import feedline
    import feedline._C as C
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    docs = [f"document {i} says {' '.join(['word'] * (i % 7))} end" for i in range(200)]
    tok.train_from_iterator(docs, tokenizers.trainers.WordLevelTrainer(special_tokens=["[UNK]", "<|endoftext|>"]))
    tok.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "docs.jsonl").write_text("".join('{"text": "%s"}\n' % d for d in docs))
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.url)
    args = (tmp_path / "docs.jsonl", tmp_path / "tokenizer.json")
    feedline.pack_text(args[0], tmp_path / "local", args[1], shard_tokens=500, progress=False)
    feedline.pack_text(args[0], "s3://data/tokens", args[1], shard_tokens=500, progress=False)
    local = sorted(p for p in (tmp_path / "local").iterdir() if p.is_file())
    keys = [k for k, _, _ in C.list_objects("s3://data/tokens/", http(moto.url))]
    assert keys == sorted("tokens/" + p.name for p in local) and len(keys) > 2
    for p in local:
        assert C.read_object(f"s3://data/tokens/{p.name}", 1 << 30, http(moto.url)) == p.read_bytes(), p.name
    with pytest.raises(FileExistsError, match=r"s3://data/tokens/manifest.json exists"):
        feedline.pack_text(args[0], "s3://data/tokens", args[1], progress=False)


def test_pack_text_reads_a_fineweb_style_parquet_prefix_in_a_bucket(moto, tmp_path, monkeypatch):
    """Parquet documents under s3://data/fineweb/ (text, id, url columns; several files and row
    groups) tokenised by pack_text through ranged reads: the same shards as from the local copy."""
    tokenizers = pytest.importorskip("tokenizers")
    pa = pytest.importorskip("pyarrow", reason="FEEDLINE_PYARROW_DIR (make test sets it) has no pyarrow")
    import pyarrow.parquet as pq

    import feedline
    import feedline._C as C
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    docs = [f"page {i} of the web says {' '.join(['more'] * (i % 11))} end" for i in range(300)]
    tok.train_from_iterator(docs, tokenizers.trainers.WordLevelTrainer(special_tokens=["[UNK]", "<|endoftext|>"]))
    tok.save(str(tmp_path / "tokenizer.json"))
    local = tmp_path / "fineweb"
    local.mkdir()
    for i, lo in enumerate(range(0, 300, 120)):
        part = docs[lo:lo + 120]
        pq.write_table(pa.table({"text": part, "id": [f"<urn:{lo + k}>" for k in range(len(part))],
                                 "url": [f"https://example.org/{lo + k}" for k in range(len(part))]}),
                       local / f"{i:03d}_00000.parquet", row_group_size=50)
    C.upload_directory(str(local), "s3://data/fineweb", "", http(moto.url))
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.url)
    tok_path = tmp_path / "tokenizer.json"
    a = feedline.pack_text(local, tmp_path / "from-disk", tok_path, shard_tokens=700, progress=False)
    b = feedline.pack_text("s3://data/fineweb/", tmp_path / "from-bucket", tok_path, shard_tokens=700,
                           progress=False)
    assert a["documents"] == b["documents"] == 300 and a["tokens"] == b["tokens"]
    assert b["tokenizer"]["library"].startswith("tokenizers ")
    for p in sorted((tmp_path / "from-disk").glob("*.flt")):
        assert (tmp_path / "from-bucket" / p.name).read_bytes() == p.read_bytes(), p.name
    with pytest.raises(ValueError, match="JSONL is read from local disk"):
        feedline.pack_text("s3://data/fineweb/000_00000.jsonl", tmp_path / "x", tok_path, progress=False)


def test_a_nanogpt_token_file_in_a_bucket_loads_like_the_local_file_and_resumes_from_it(moto, tmp_path):
    import numpy as np

    import feedline
    rng = np.random.default_rng(4)
    ids = rng.integers(1, 50000, size=3_000_000, dtype=np.uint16)  # 6 MB: several 1 MiB blocks
    ids[rng.integers(0, ids.size, size=3000)] = 0  # eos
    (tmp_path / "train.bin").write_bytes(ids.tobytes())
    moto.boto(f"s3.upload_file('{tmp_path / 'train.bin'}', 'data', 'nanogpt/train.bin')")

    def loader(src):
        return feedline.TokenLoader(src, seq_len=256, batch_size=8, shuffle=True, seed=1, eos_token=0, num_threads=2,
                                    endpoint_url=moto.url, fields=("input_ids", "labels", "document_ids"))
    local, remote = loader(tmp_path / "train.bin"), loader("s3://data/nanogpt/train.bin")
    assert len(local) == len(remote) and local._fingerprints() == remote._fingerprints()
    it_l, it_r = iter(local), iter(remote)
    for _ in range(40):
        a, b = next(it_l), next(it_r)
        for k in ("input_ids", "labels", "document_ids"):
            assert torch.equal(a[k], b[k]), k
    state = local.state_dict()
    rest = [next(it_l)["input_ids"] for _ in range(20)]
    resumed = loader("s3://data/nanogpt/train.bin")
    resumed.load_state_dict(state)
    it = iter(resumed)
    assert all(torch.equal(x, next(it)["input_ids"]) for x in rest)
    # Megatron prefixes and token shards stay local, said so by name.
    moto.boto("s3.put_object(Bucket='data', Key='nanogpt/mega.idx', Body=b'x')")
    moto.boto("s3.put_object(Bucket='data', Key='nanogpt/mega.bin', Body=b'xx')")
    with pytest.raises(Exception, match=r"s3://data/nanogpt/mega.bin.*read from local disk only"):
        loader("s3://data/nanogpt/mega.bin")


def test_parquet_shards_in_a_bucket_load_like_the_local_files_and_resume_from_them(moto, folder, tmp_path):
    """Hub-layout Parquet under s3://data/hub/ (docs/columnar.md): the same
    batches as the local files, row groups read with ranged GETs, and a
    state saved on the local copy resumed on the bucket's."""
    pa = pytest.importorskip("pyarrow", reason="FEEDLINE_PYARROW_DIR (make test sets it) has no pyarrow")
    import pyarrow.parquet as pq

    import feedline
    import feedline._C as C
    if not C.columnar_supported():
        pytest.skip("built without Arrow")
    classes = sorted(p.name for p in folder.iterdir())
    rows = [({"bytes": f.read_bytes(), "path": f"{c}/{f.name}"}, i)
            for i, c in enumerate(classes) for f in sorted((folder / c).iterdir())]
    table = pa.table({"image": pa.array([r for r, _ in rows]), "label": pa.array([y for _, y in rows], pa.int64())})
    local = tmp_path / "hub"
    local.mkdir()
    for i, lo in enumerate(range(0, len(rows), 30)):
        pq.write_table(table.slice(lo, 30), local / f"train-{i:05d}.parquet", row_group_size=8)
    C.upload_directory(str(local), "s3://data/hub", "", http(moto.url))
    before = C.object_store_stats()["gets"]

    def make(src, **kw):
        return feedline.Loader(src, batch_size=8, shuffle=True, seed=4, num_threads=2,
                               transform=feedline.transforms.imagenet_eval(64), **kw)

    remote = make("s3://data/hub/", endpoint_url=moto.url)
    assert remote._loader.source_kind == "columnar"
    ref = list(make(local))
    got = list(remote)
    assert len(got) == len(ref) == 10
    assert all(torch.equal(a, b) and torch.equal(la, lb) for (a, la), (b, lb) in zip(ref, got))
    # Row groups are fetched whole (their columns' chunks in one or two ranged GETs), not row by row.
    assert C.object_store_stats()["gets"] - before < len(rows) / 2
    loader = make(local)
    it = iter(loader)
    next(it), next(it), next(it)
    state = loader.state_dict()
    rest = [lb for _, lb in it]
    resumed = make("s3://data/hub", endpoint_url=moto.url)
    resumed.load_state_dict(state)
    again = [lb for _, lb in resumed]
    assert len(again) == len(rest) == 7 and all(torch.equal(a, b) for a, b in zip(rest, again))
