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


def test_listing_follows_every_page(moto):
    import feedline._C as C
    moto.boto("for i in range(1203): s3.put_object(Bucket='data', Key=f'many/{i:05d}', Body=b'x')")
    keys = [k for k, _, _ in C.list_objects("s3://data/many/", http(moto.url))]
    assert keys == [f"many/{i:05d}" for i in range(1203)]


def test_missing_objects_buckets_and_bad_keys_name_the_url_and_s3_code(moto, uploaded):
    import feedline
    import feedline._C as C
    with pytest.raises(FileNotFoundError, match=r"s3://data/nothing/manifest.json"):
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


@pytest.mark.parametrize("fault", ["503", "reset", "cut"])
def test_every_fault_of_the_proxy_is_survived_with_every_sample_once(moto, uploaded, fault):
    import feedline
    proxy = FaultProxy(moto.port)
    try:
        local = feedline.Loader(uploaded, batch_size=8, shuffle=True, seed=3, num_threads=2)
        proxy.fault, proxy.every = fault, 3
        remote = feedline.Loader("s3://data/ds", batch_size=8, shuffle=True, seed=3, num_threads=2,
                                 endpoint_url=proxy.url, http_retries=6)
        got = [(a, la) for a, la in remote]
        want = [(a, la) for a, la in local]
        assert len(got) == len(want)
        for (a, la), (b, lb) in zip(want, got):
            assert torch.equal(a, b) and torch.equal(la, lb)
        assert proxy.injected > 0
    finally:
        proxy.close()
