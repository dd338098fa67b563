"""Object stores (issue 35): the train recipe over data in a bucket,
feedline beside the real peers, side by side in one run on the same server
and data, with 0 ms and 20 ms of added first-byte latency per request.

- feedline on the local WebDataset tars (the reference the bucket rows are
  held to: within 10% at 20 ms is the target), on the same tars in a bucket
  (s3://bench/wds/: shuffled, a ranged GET per sample read ahead; and in
  order, -ordered, where read-ahead reads runs of samples in one GET), and
  on the ImageFolder tree in a bucket (s3://bench/folder/), native train
  recipe (feedline.transforms.imagenet_train);
- s3torchconnector 1.5 (Amazon's connector, the AWS CRT): S3IterableDataset
  over the tar objects (enable_sharding across DataLoader workers, each tar
  streamed through tarfile, so in tar order: no shuffle), and S3MapDataset
  over the folder prefix (shuffled);
- fsspec/s3fs: a map dataset over the folder's keys, one cat_file per image;
  the peers decode with PIL and run torchvision's RandomResizedCrop(224) +
  flip + ToTensor + Normalize in DataLoader(num_workers=cores).
- raw reads of one 64 MiB object: feedline (read_object), s3fs, the
  connector, and the same bytes from a local file.

The server is moto's (tests/integration/s3_server.py; the only
S3-compatible server that installs here), behind the tests' proxy, which
adds the latency: both are Python, so absolute rates are this machine's and
this server's, and the ratios between rows are the figures. Medians of
interleaved rounds; bench/results/s3.{md,json}.

    python bench/e2e/s3_bench.py [--images 600] [--repeats 3] [--quick]

Needs FEEDLINE_S3_VENV (moto) and FEEDLINE_S3PEERS (a venv with
s3torchconnector and s3fs, bench/e2e/requirements-s3peers.txt; run under
the torch 2 venv's Python, whose torch they use); `make bench` sets both.
"""
import datetime
import io
import json
import os
import pathlib
import platform
import statistics
import sys
import tarfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from bench.common import results as bench_results  # noqa: E402
from bench.common import workers  # noqa: E402

FEEDLINE = os.environ.get("FEEDLINE_BIN", str(ROOT / "build" / "tools" / "feedline"))
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
RAW_BYTES = 64 << 20
LATENCIES_MS = (0, 20)


# -- the peers' pieces (run in the workers) -----------------------------------------------
def torchvision_train():
    import torchvision.transforms as T
    return T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])


def pil_sample(data, label, tf):
    from PIL import Image
    return tf(Image.open(io.BytesIO(data)).convert("RGB")), label


def label_of(key, prefix):
    """A folder key's label: its class directory's index among the sorted
    classes (BENCH_CLASSES, the driver's; the peers list the keys themselves)."""
    classes = json.loads(os.environ["BENCH_CLASSES"])
    return classes.index(key[len(prefix):].split("/")[0])


class S3fsFolder:
    """fsspec/s3fs map dataset: one cat_file per sample. The filesystem is made
    in each worker (s3fs's event loop does not survive fork)."""

    def __init__(self, url, endpoint):
        import s3fs
        self.endpoint, self.pid, self.fs = endpoint, None, None
        fs = s3fs.S3FileSystem(endpoint_url=endpoint)
        prefix = url[len("s3://"):].rstrip("/") + "/"
        self.keys = sorted(k for k in fs.find(prefix) if k.endswith(".jpg"))
        self.labels = [label_of(k, prefix) for k in self.keys]
        self.tf = torchvision_train()

    def __len__(self):
        return len(self.keys)

    def __getitem__(self, i):
        if self.pid != os.getpid():
            import s3fs
            self.fs = s3fs.S3FileSystem(endpoint_url=self.endpoint, skip_instance_cache=True)
            self.pid = os.getpid()
        return pil_sample(self.fs.cat_file(self.keys[i]), self.labels[i], self.tf)


def connector_config():
    from s3torchconnector import S3ClientConfig
    return S3ClientConfig(force_path_style=True)


def connector_folder(url, endpoint):
    from s3torchconnector import S3MapDataset
    ds = S3MapDataset.from_prefix(url, region="us-east-1", endpoint=endpoint, s3client_config=connector_config())
    tf = torchvision_train()
    prefix = url[len("s3://"):].split("/", 1)[1].rstrip("/") + "/"

    class Mapped:
        def __len__(self):
            return len(ds)  # lists the prefix (once)

        def __getitem__(self, i):
            reader = ds[i]
            return pil_sample(reader.read(), label_of(reader.key, prefix), tf)
    return Mapped()


def connector_tars(urls, endpoint):
    import torch.utils.data
    from s3torchconnector import S3IterableDataset
    tf = torchvision_train()

    class Tars(torch.utils.data.IterableDataset):
        def __iter__(self):
            ds = S3IterableDataset.from_objects(urls, region="us-east-1", endpoint=endpoint,
                                                s3client_config=connector_config(), enable_sharding=True)
            for reader in ds:
                with tarfile.open(fileobj=reader, mode="r|") as tar:
                    sample = {}
                    for m in tar:
                        key, ext = m.name.split(".", 1)
                        if sample and sample["key"] != key:
                            yield pil_sample(sample["jpg"], int(sample["cls"]), tf)
                            sample = {}
                        sample["key"] = key
                        sample[ext] = tar.extractfile(m).read()
                    if sample:
                        yield pil_sample(sample["jpg"], int(sample["cls"]), tf)
    return Tars()


def raw_read(name, url, endpoint, local):
    """Seconds to read the object whole, once: imports and clients made
    before the clock starts, so only the transfer counts."""
    if name == "raw/feedline":
        import feedline._C as C
        h = C.HttpOptions()
        h.s3.endpoint_url = endpoint

        def read():
            return C.read_object(url, 1 << 30, h)
    elif name == "raw/s3fs":
        import s3fs
        fs = s3fs.S3FileSystem(endpoint_url=endpoint)

        def read():
            return fs.cat_file(url[len("s3://"):])
    elif name == "raw/s3torchconnector":
        from s3torchconnector import S3MapDataset
        ds = S3MapDataset.from_objects([url], region="us-east-1", endpoint=endpoint,
                                       s3client_config=connector_config())

        def read():
            return ds[0].read()
    else:
        def read():
            return pathlib.Path(local).read_bytes()
    t0 = time.perf_counter()
    n = len(read())
    s = time.perf_counter() - t0
    assert n == RAW_BYTES, (name, n)
    return s


def worker(a):
    endpoint = os.environ["BENCH_S3_ENDPOINT"]
    if a.worker.startswith("raw/"):
        s = raw_read(a.worker, a.data, endpoint, os.environ["BENCH_S3_RAW_LOCAL"])
        print(json.dumps({"samples_per_s": round(RAW_BYTES / s / 1e6, 1), "seconds": round(s, 3)}))
        return
    import torch
    from torch.utils.data import DataLoader
    torch.manual_seed(1)
    # Libraries imported before the clock: time to first batch is the
    # loader's (listing, opening, the first batch's reads and decodes).
    if a.worker.startswith("feedline/"):
        import feedline
    elif a.worker.startswith("s3torchconnector/"):
        import s3torchconnector  # noqa: F401
    else:
        import s3fs  # noqa: F401
    t_make = time.perf_counter()
    if a.worker.startswith("feedline/"):
        remote = a.data.startswith("s3://")
        ld = feedline.Loader(a.data, batch_size=a.batch, transform=feedline.transforms.imagenet_train(),
                             shuffle=not a.worker.endswith("-ordered"), seed=1, drop_last=True,
                             num_threads=a.cores,
                             endpoint_url=endpoint if remote else None)
        batches = workers.epochs(lambda: iter(ld))
    else:
        if a.worker == "s3torchconnector/wds":
            ds, shuffle = connector_tars(a.data.split(","), endpoint), False
        elif a.worker == "s3torchconnector/folder":
            ds, shuffle = connector_folder(a.data, endpoint), True
        else:
            ds, shuffle = S3fsFolder(a.data, endpoint), True
        ld = DataLoader(ds, batch_size=a.batch, shuffle=shuffle, num_workers=a.cores, drop_last=True,
                        persistent_workers=True)
        batches = workers.epochs(lambda: iter(ld))
    create_s = time.perf_counter() - t_make
    out, _ = workers.timed(batches, a.warmup, a.batches, lambda b: b[0].shape[0])
    out["create_s"] = round(create_s, 3)
    out["first_batch_s"] = round(create_s + out["first_batch_s"], 4)  # from the loader's creation
    print(json.dumps(out), flush=True)
    # The DataLoader's workers stop now (they would go on prefetching from
    # the server into the next row's measurement); then no slow teardown.
    it = getattr(ld, "_iterator", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()
    os._exit(0)


# -- the driver -------------------------------------------------------------------------------
def ensure_tars(folder, out, shards):
    if out.exists() and len(list(out.glob("*.tar"))) == shards:
        return sorted(out.glob("*.tar"))
    out.mkdir(parents=True, exist_ok=True)
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    files = sorted(p for p in folder.rglob("*.jpg"))
    for t in range(shards):
        with tarfile.open(out / f"shard-{t:05d}.tar", "w") as tar:
            for i, f in enumerate(files[t::shards]):
                for name, data in ((f"s{t}_{i:06d}.jpg", f.read_bytes()),
                                   (f"s{t}_{i:06d}.cls", str(classes.index(f.parent.name)).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return sorted(out.glob("*.tar"))


def upload(moto, local_dir, bucket, prefix):
    moto.boto("import os\n"
              f"root = {str(local_dir)!r}\n"
              "for d, _, fs in os.walk(root):\n"
              "    for f in fs:\n"
              "        p = os.path.join(d, f)\n"
              f"        s3.upload_file(p, {bucket!r}, {prefix!r} + os.path.relpath(p, root))\n")


def main():
    ap = workers.parser(images=600)
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    if a.quick:
        workers.quick(a)
        a.images, a.batches = 128, 2
    from s3_server import FaultProxy, Moto, venv
    peers = os.environ.get("FEEDLINE_S3PEERS")
    if venv() is None:
        raise SystemExit("s3_bench: FEEDLINE_S3_VENV (moto) is not set or has no moto_server (make bench sets it)")
    site = sorted(pathlib.Path(peers).glob("lib/python3*/site-packages")) if peers else []
    cores = os.cpu_count() or 1
    folder = workers.ensure_dataset(FEEDLINE, a.images)
    tars = ensure_tars(folder, ROOT / "bench" / "data" / f"{folder.name}-tars", max(4, cores))
    raw_local = ROOT / "bench" / "data" / "s3-raw-64MiB.bin"
    if not raw_local.exists() or raw_local.stat().st_size != RAW_BYTES:
        raw_local.write_bytes(os.urandom(RAW_BYTES))
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1",
                      AWS_EC2_METADATA_DISABLED="true", BENCH_S3_RAW_LOCAL=str(raw_local),
                      BENCH_CLASSES=json.dumps(sorted(p.name for p in folder.iterdir() if p.is_dir())))
    moto = Moto()
    proxy = FaultProxy(moto.port)
    try:
        moto.boto("s3.create_bucket(Bucket='bench')")
        upload(moto, folder, "bench", "folder/")
        upload(moto, tars[0].parent, "bench", "wds/")
        moto.boto(f"s3.upload_file({str(raw_local)!r}, 'bench', 'raw.bin')")
        tar_urls = ",".join(f"s3://bench/wds/{t.name}" for t in tars)
        py = sys.executable
        feedline_path = os.environ.get("FEEDLINE_PYTHONPATH", str(ROOT / "build" / "python"))
        peer_path = os.pathsep.join([str(s) for s in site] + [feedline_path])
        configs = {"feedline/local-wds": (str(tars[0].parent), feedline_path),
                   "feedline/local-wds-ordered": (str(tars[0].parent), feedline_path),
                   "feedline/s3-wds": ("s3://bench/wds/", feedline_path),
                   "feedline/s3-wds-ordered": ("s3://bench/wds/", feedline_path),
                   "feedline/s3-folder": ("s3://bench/folder/", feedline_path)}
        if site:
            configs.update({"s3torchconnector/wds": (tar_urls, peer_path),
                            "s3torchconnector/folder": ("s3://bench/folder/", peer_path),
                            "s3fs/folder": ("s3://bench/folder/", peer_path)})
        raw = {"raw/local": feedline_path, "raw/feedline": feedline_path}
        if site:
            raw.update({"raw/s3fs": peer_path, "raw/s3torchconnector": peer_path})
        runs = {}
        for _ in range(a.repeats):  # interleaved rounds: drift hits every row alike
            for ms in LATENCIES_MS:
                proxy.delay_s = ms / 1000
                os.environ["BENCH_S3_ENDPOINT"] = proxy.url
                for name, (data, path) in configs.items():
                    if name.startswith("feedline/local-") and ms:
                        continue  # no store, no latency
                    runs.setdefault(f"{name} @{ms} ms", []).append(
                        workers.run_worker(__file__, py, name, data, a, cores, path, raise_on_error=False))
            proxy.delay_s = 0.0
            os.environ["BENCH_S3_ENDPOINT"] = moto.url  # raw reads: straight to the server
            for name, path in raw.items():
                runs.setdefault(name, []).append(
                    workers.run_worker(__file__, py, name, "s3://bench/raw.bin", a, cores, path,
                                       raise_on_error=False))
    finally:
        proxy.close()
        moto.close()
    table = {}
    for name, rs in runs.items():
        ok = [r for r in rs if not r.get("error")]
        if not ok:
            table[name] = {"error": rs[0]["error"]}
            continue
        rates = [r["samples_per_s"] for r in ok]
        table[name] = {"samples_per_s": statistics.median(rates), "min": min(rates), "max": max(rates),
                       "first_batch_s": statistics.median(r.get("first_batch_s", 0.0) for r in ok), "runs": rs}

    def ratio(x, y):
        n, d = table.get(x, {}).get("samples_per_s"), table.get(y, {}).get("samples_per_s")
        return n / d if n and d else None
    ratios = {}
    for ms in LATENCIES_MS:
        ratios[f"feedline s3 wds / local wds, shuffled @{ms} ms (target >= 0.9 at 20 ms)"] = ratio(
            f"feedline/s3-wds @{ms} ms", "feedline/local-wds @0 ms")
        ratios[f"feedline s3 wds / local wds, in order @{ms} ms (target >= 0.9 at 20 ms)"] = ratio(
            f"feedline/s3-wds-ordered @{ms} ms", "feedline/local-wds-ordered @0 ms")
        ratios[f"feedline s3 wds / s3torchconnector wds (unshuffled) @{ms} ms"] = ratio(
            f"feedline/s3-wds @{ms} ms", f"s3torchconnector/wds @{ms} ms")
        ratios[f"feedline s3 wds in order / s3torchconnector wds (both unshuffled) @{ms} ms"] = ratio(
            f"feedline/s3-wds-ordered @{ms} ms", f"s3torchconnector/wds @{ms} ms")
        ratios[f"feedline s3 folder / s3torchconnector folder @{ms} ms"] = ratio(
            f"feedline/s3-folder @{ms} ms", f"s3torchconnector/folder @{ms} ms")
        ratios[f"feedline s3 folder / s3fs folder @{ms} ms"] = ratio(
            f"feedline/s3-folder @{ms} ms", f"s3fs/folder @{ms} ms")
    ratios["raw: feedline / local file"] = ratio("raw/feedline", "raw/local")
    ratios["raw: feedline / s3torchconnector"] = ratio("raw/feedline", "raw/s3torchconnector")
    ratios["raw: feedline / s3fs"] = ratio("raw/feedline", "raw/s3fs")
    meta = {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {cores} cores",
            "dataset": f"{a.images} generated ImageNet-like images ({folder.name}), {len(tars)} tars",
            "server": "moto (Python) behind the tests' Python proxy, 127.0.0.1", "batch": a.batch,
            "repeats": a.repeats, "peers": "installed" if site else "FEEDLINE_S3PEERS not set: peers not run"}
    lines = ["# Object stores: the train recipe from a bucket (issue 35)", "",
             f"{meta['date']}, {meta['machine']}, {meta['dataset']}, batch {a.batch}, median of {a.repeats} "
             f"interleaved rounds (spread min-max); server: {meta['server']}; latency added before each "
             "answer's first byte. Raw rows: MB/s of one 64 MiB object, straight to the server.", ""]
    lines += workers.rate_rows(table, lambda e: "not run | " + e.splitlines()[0][:160])
    lines += [""] + workers.ratio_rows(ratios)
    text = "\n".join(lines) + "\n"
    print(text)
    bench_results.write("s3", {"meta": meta, "results": table, "ratios": ratios}, text, quick=a.quick)


if __name__ == "__main__":
    main()
