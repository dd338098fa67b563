"""Parquet sources (issue 36 "Benchmarks"): a Hub-layout image dataset (the
generated photo set as 8 Parquet shards, images as {bytes, path} structs,
labels with ClassLabel metadata) read by

- feedline/parquet: feedline.Loader(the shards' folder, transform=compose),
- feedline/files: feedline.Loader(the same JPEGs as an ImageFolder), the
  target's reference (Parquet within 5% of it),
- feedline/arrow-table: pyarrow.parquet.read_table(the shards) handed to
  feedline.Loader as a table (the Arrow C stream, zero-copy): the library
  choice measured, pyarrow reading everything up front vs the engine reading
  row groups with Arrow C++ (docs/columnar.md, "Library"),
- datasets/parquet: datasets.load_dataset("parquet", data_files=shards)
  .with_transform(compose over the decoded images), torch DataLoader with
  num_workers = cores (the Hugging Face way; target: feedline >= 5x),

side by side in one run, interleaved rounds, medians, the same torchvision
v2 train Compose for all (feedline translates it natively), same cores.
Each configuration is its own process printing one JSON line; `open_s` is
the time from nothing to a loader (load_dataset's Arrow conversion
included), `first_batch_s` from the loader to its first batch.

Runs under the torch 2 venv of `make test-torch2` (datasets and pyarrow are
in it; feedline from build-torch2/python). Results go to
bench/results/columnar.{json,md}.

    <torch2 venv>/bin/python bench/e2e/columnar_bench.py [--images 1000] [--repeats 3] [--quick]
"""
import datetime
import json
import os
import pathlib
import platform
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
FEEDLINE = os.environ.get("FEEDLINE_BIN", str(ROOT / "build-torch2" / "tools" / "feedline"))
PYTHONPATH = os.environ.get("FEEDLINE_PYTHONPATH", str(ROOT / "build-torch2" / "python"))
sys.path.insert(0, str(ROOT))
from bench.common import results as bench_results  # noqa: E402
from bench.common import workers  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
NUM_CLASSES = 10
SHARDS = 8
CONFIGS = ("feedline/parquet", "feedline/files", "feedline/arrow-table", "datasets/parquet")


def compose():
    import torch
    import torchvision.transforms.v2 as T
    return T.Compose([T.RandomResizedCrop(224, antialias=True), T.RandomHorizontalFlip(), T.PILToTensor(),
                      T.ToDtype(torch.float32, scale=True), T.Normalize(MEAN, STD)])


def write_parquet(folder: pathlib.Path) -> pathlib.Path:
    """The folder's images as SHARDS Hub-layout Parquet shards (written once, beside it)."""
    out = folder.parent / f"{folder.name}-parquet"
    if (out / f"train-{SHARDS - 1:05d}-of-{SHARDS:05d}.parquet").exists():
        return out
    import pyarrow as pa
    import pyarrow.parquet as pq
    classes = sorted(d.name for d in folder.iterdir() if d.is_dir())
    rows = [({"bytes": f.read_bytes(), "path": f"{c}/{f.name}"}, i)
            for i, c in enumerate(classes) for f in sorted((folder / c).iterdir())]
    features = {"image": {"_type": "Image"}, "label": {"names": classes, "_type": "ClassLabel"}}
    schema = pa.schema([("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
                        ("label", pa.int64())],
                       metadata={"huggingface": json.dumps({"info": {"features": features}})})
    table = pa.Table.from_pydict({"image": [r for r, _ in rows], "label": [y for _, y in rows]}, schema=schema)
    tmp = out.with_suffix(".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    per = (len(rows) + SHARDS - 1) // SHARDS
    for s in range(SHARDS):
        # The Hub's converter writes row groups of ~100 rows for image data.
        pq.write_table(table.slice(s * per, per), tmp / f"train-{s:05d}-of-{SHARDS:05d}.parquet", row_group_size=100)
    tmp.rename(out)
    return out


def worker(a):
    import torch
    t = compose()
    kind = a.worker
    folder = pathlib.Path(a.data)
    shards = sorted(str(p) for p in write_parquet(folder).glob("*.parquet"))
    t0 = time.perf_counter()
    if kind.startswith("feedline/"):
        import feedline
        if kind == "feedline/arrow-table":
            import pyarrow.parquet as pq
            src = pq.read_table(pathlib.Path(shards[0]).parent)
        else:
            src = folder if kind == "feedline/files" else pathlib.Path(shards[0]).parent
        ld = feedline.Loader(src, batch_size=a.batch, transform=t, shuffle=True, seed=1, drop_last=True,
                             num_threads=a.cores, strict=True)
        open_s = time.perf_counter() - t0
        out, last = workers.timed(workers.epochs(lambda: iter(ld)), a.warmup, a.batches, lambda b: b[0].shape[0])
        out["source_kind"] = ld._loader.source_kind
        ld.close()
    elif kind == "datasets/parquet":
        import datasets
        from torch.utils.data import DataLoader
        torch.manual_seed(1)
        ds = datasets.load_dataset("parquet", data_files=shards, split="train",
                                   cache_dir=str(folder.parent / "hf-cache"))

        def transform(batch):
            return {"image": [t(im.convert("RGB")) for im in batch["image"]], "label": batch["label"]}

        ds = ds.with_transform(transform)

        def collate(samples):
            return (torch.stack([s["image"] for s in samples]), torch.tensor([s["label"] for s in samples]))

        ld = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.cores, drop_last=True,
                        persistent_workers=True, collate_fn=collate)
        open_s = time.perf_counter() - t0
        out, last = workers.timed(workers.epochs(lambda: iter(ld)), a.warmup, a.batches, lambda b: b[0].shape[0])
        out["datasets"] = datasets.__version__
    else:
        raise SystemExit(f"unknown worker {kind}")
    out["open_s"] = round(open_s, 4)
    out["shape"] = list(last[0].shape)
    import pyarrow
    import torchvision
    out["torch"], out["torchvision"], out["pyarrow"] = torch.__version__, torchvision.__version__, pyarrow.__version__
    print(json.dumps(out))


def main():
    ap = workers.parser(images=1000)
    a = ap.parse_args()
    if a.worker:
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        return worker(a)
    if a.quick:
        workers.quick(a)
    cores = os.cpu_count() or 1
    folder = workers.ensure_dataset(FEEDLINE, a.images, NUM_CLASSES)
    write_parquet(folder)
    os.environ.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(folder.parent / "hf-home"))
    runs = {}
    for _ in range(a.repeats):  # interleaved, so drift hits all alike
        for name in CONFIGS:
            runs.setdefault(name, []).append(
                workers.run_worker(str(pathlib.Path(__file__).resolve()), sys.executable, name, folder, a, cores,
                                   PYTHONPATH, raise_on_error=False))
    table = workers.median_table(runs, "samples_per_s", medians=("first_batch_s", "open_s"))
    p, f, t, d = (table[c].get("samples_per_s") for c in CONFIGS)
    ratios = {
        "feedline Parquet / feedline on the same JPEG files (target >= 0.95x)": p / f if p and f else None,
        "feedline Parquet / datasets + DataLoader (target >= 5x)": p / d if p and d else None,
        "feedline Parquet (Arrow C++ in the engine) / a pyarrow table through the C stream": p / t if p and t else None,
    }
    first = next((r for rs in runs.values() for r in rs if "error" not in r), {})
    meta = {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {cores} cores",
            "dataset": f"{a.images} generated ImageNet-like images as {SHARDS} Parquet shards (row groups of 100)",
            "batch": a.batch, "repeats": a.repeats, "torch": first.get("torch"), "pyarrow": first.get("pyarrow"),
            "datasets": next((r.get("datasets") for rs in runs.values() for r in rs if r.get("datasets")), None),
            "load_avg_1min": os.getloadavg()[0]}
    lines = ["# Parquet image data: feedline vs datasets + DataLoader, and vs the same files (issue 36)", "",
             f"{meta['date']}, {meta['machine']}, {meta['dataset']}, batch {a.batch}, {a.batches} timed batches "
             f"after {a.warmup}, median of {a.repeats} interleaved rounds (spread min-max), torch {meta['torch']}, "
             f"pyarrow {meta['pyarrow']}, datasets {meta['datasets']}, load average {meta['load_avg_1min']:.1f} "
             f"at the end. One torchvision v2 train Compose for all (RandomResizedCrop 224, flip, normalise); "
             f"feedline runs it natively (strict=True) on {cores} threads, datasets in with_transform on "
             f"{cores} DataLoader workers.", ""]
    lines += workers.rate_rows(table, lambda e: "failed | " + e.splitlines()[-1][:160])
    lines += ["", "| configuration | open (to a loader) |", "|---|---|"]
    lines += [f"| {n} | {r['open_s']:.2f} s |" for n, r in table.items() if r.get("open_s") is not None]
    lines += [""] + workers.ratio_rows(ratios)
    text = "\n".join(lines) + "\n"
    print(text)
    bench_results.write("columnar", {"meta": meta, "results": table, "ratios": ratios}, text, quick=a.quick)
    failed = [n for n, r in table.items() if r.get("error")]
    if a.quick and failed:  # the CI smoke (make test-torch2): a configuration that rots fails it
        sys.exit(f"{', '.join(failed)} failed: " + table[failed[0]]["error"][-2000:])


if __name__ == "__main__":
    main()
