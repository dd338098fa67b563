"""Storage: the same images as loose files (ImageFolder), feedline shards and
WebDataset tars, read side by side in one run (no decode: read throughput
through the engine, shuffled order = random access), plus `feedline pack`
throughput. Page-cached: this measures per-file overheads (open, stat,
close per image) and the readers, not the disk. Medians of --repeats;
results in bench/results/storage.{md,json}.

    /usr/bin/python3 bench/e2e/storage_bench.py [--images 2000] [--repeats 3] [--quick]
"""
import argparse
import datetime
import io
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tarfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.common import results as bench_results  # noqa: E402

FEEDLINE = os.environ.get("FEEDLINE_BIN", str(ROOT / "build" / "tools" / "feedline"))


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def write_tars(folder, out, per_tar=1000):
    out.mkdir(parents=True, exist_ok=True)
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    for t in range(0, len(files), per_tar):
        with tarfile.open(out / f"shard-{t // per_tar:05d}.tar", "w") as tar:
            for i, f in enumerate(files[t:t + per_tar], start=t):
                for name, data in ((f"{i:08d}{f.suffix}", f.read_bytes()),
                                   (f"{i:08d}.cls", str(classes.index(f.parent.name)).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--passes", type=int, default=20)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.images, a.repeats, a.passes = 300, 1, 2
    cores = os.cpu_count()
    data = ROOT / "bench" / "data"
    folder = data / f"imagenet-like-{a.images}"
    if not (folder / "class_0000").exists():
        subprocess.run([FEEDLINE, "gen-dataset", str(folder), "--images", str(a.images), "--classes", "10"],
                       check=True, capture_output=True)
    shards, tars = data / f"imagenet-like-{a.images}-shards", data / f"imagenet-like-{a.images}-tar"
    input_mb = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6
    pack_rates = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        subprocess.run([FEEDLINE, "pack", str(folder), str(shards), "--overwrite", "--shard-bytes", str(16 << 20)],
                       check=True, capture_output=True)
        pack_rates.append(input_mb / (time.perf_counter() - t0))
    if not tars.exists():
        write_tars(folder, tars)
    sources = {"loose files": folder, "feedline shards": shards, "WebDataset tar": tars}
    results = {}
    for _ in range(a.repeats):
        for name, path in sources.items():
            for threads in (1, cores):
                r = run_json([FEEDLINE, "bench-read", str(path), "--threads", str(threads), "--passes", str(a.passes)])
                results.setdefault((name, threads), []).append(r)
    rows = {}
    for (name, threads), runs in results.items():
        rows[f"{name}, {threads} thread{'s' if threads > 1 else ''}"] = {
            "samples_per_s": statistics.median(r["samples_per_s"] for r in runs),
            "min": min(r["samples_per_s"] for r in runs), "max": max(r["samples_per_s"] for r in runs),
            "mb_per_s": statistics.median(r["mb_per_s"] for r in runs)}
    files_rate = {t: statistics.median(r["samples_per_s"] for r in results[("loose files", t)]) for t in (1, cores)}
    ratios = {}
    for t in (1, cores):
        for name in ("feedline shards", "WebDataset tar"):
            ratios[f"{name} / loose files, {t} thread(s)"] = statistics.median(
                r["samples_per_s"] for r in results[(name, t)]) / files_rate[t]
    meta = {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {cores} cores",
            "dataset": f"{a.images} generated ImageNet-like images, {input_mb:.1f} MB", "repeats": a.repeats}
    lines = ["# Storage: loose files vs feedline shards vs WebDataset tar", "",
             f"{meta['date']}, {meta['machine']}, {meta['dataset']}, page-cached, median of {a.repeats}.", "",
             f"`feedline pack`: {statistics.median(pack_rates):.0f} MB/s of input (median; "
             f"{min(pack_rates):.0f}-{max(pack_rates):.0f}).", "",
             "| read (no decode, shuffled) | samples/s | spread | MB/s |", "|---|---|---|---|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['samples_per_s']:.0f} | {r['min']:.0f}-{r['max']:.0f} | {r['mb_per_s']:.0f} |")
    lines += ["", "| ratio | value |", "|---|---|"] + [f"| {k} | {v:.2f}x |" for k, v in ratios.items()]
    text = "\n".join(lines) + "\n"
    print(text)
    bench_results.write("storage", {"meta": meta, "pack_mb_per_s": pack_rates, "rows": rows, "ratios": ratios}, text,
                  quick=a.quick)


if __name__ == "__main__":
    main()
