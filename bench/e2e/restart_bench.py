"""Restart intervals (docs/restart_intervals.md): what `feedline pack
--restart-interval N` costs in bytes and gains in train-recipe rate, on the
two generated datasets of bench/peers/datasets.py (small: gen-dataset's
ImageNet-like 300-500 px; large: 1-4 megapixel JPEGs).

Each dataset is packed without markers and with each N; every pack is then
read by feedline's Python loader with the train recipe (RandomResizedCrop
224, flip, normalise, float32) on one thread, each configuration in its own
process, the configurations interleaved and repeated; medians reported.
The size overhead is the packed bytes against the plain pack (the rewrite
also optimises Huffman tables, which wins back part of the markers' cost).
Results go to bench/results/restart.{md,json}.

    /usr/bin/python3 bench/e2e/restart_bench.py [--small 600] [--large 96] [--repeats 3] [--quick]
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
FEEDLINE = os.environ.get("FEEDLINE_BIN", str(ROOT / "build" / "tools" / "feedline"))
PYTHON = "/usr/bin/python3"
sys.path.insert(0, str(ROOT))
from bench.common import results as bench_results  # noqa: E402
from bench.peers import datasets  # noqa: E402

INTERVALS = [1, 4, 16, 64]


def packed(src, out, interval):
    """src packed into out (once) with --restart-interval interval; total shard bytes."""
    if not (out / "manifest.json").exists():
        args = [FEEDLINE, "pack", str(src), str(out), "--overwrite"]
        if interval:
            args += ["--restart-interval", str(interval)]
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    manifest = json.loads((out / "manifest.json").read_text())
    return sum(s["bytes"] for s in manifest["shards"])


def rate(data, batch, batches):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "build" / "python"))
    cmd = [PYTHON, str(ROOT / "bench/e2e/feedline_python.py"), "--data", str(data), "--recipe", "train",
           "--threads", "1", "--batch", str(batch), "--batches", str(batches), "--warmup", "1"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, timeout=900).stdout
    r = json.loads(out.strip().splitlines()[-1])
    # CPU time per image as well as the rate: on a shared machine the wall
    # clock also measures the neighbours.
    return r["images_per_s"], 1000 * r["cpu_s"] / r["images"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", type=int, default=600)
    ap.add_argument("--large", type=int, default=96)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smoke: tiny datasets, one repeat")
    a = ap.parse_args()
    if a.quick:
        a.small, a.large, a.repeats = 100, 20, 1
    # feedline_python.py's hand-over probe needs 4 batches in an epoch.
    sources = {"small": (datasets.make_small(FEEDLINE, a.small), min(64, a.small // 5), 2 if a.quick else 10),
               "large": (datasets.make_large(a.large), min(16, a.large // 5), 1 if a.quick else 8)}
    work = ROOT / "build" / "restart-bench"
    table = {}
    for name, (src, batch, batches) in sources.items():
        sizes = {n: packed(src, work / f"{name}-{src.name}-n{n}", n) for n in [0] + INTERVALS}
        rates = {n: [] for n in sizes}
        for _ in range(a.repeats):
            for n in sizes:  # interleaved, so drift hits all alike
                rates[n].append(rate(work / f"{name}-{src.name}-n{n}", batch, batches))
        def med(n, k, rates=rates):
            return statistics.median(r[k] for r in rates[n])

        table[name] = {"images": len([p for p in src.rglob("*") if p.suffix in (".jpg", ".png")]),
                       "rows": [{"interval": n, "bytes": sizes[n],
                                 "size_overhead_pct": 100 * (sizes[n] / sizes[0] - 1),
                                 "images_per_s": med(n, 0), "runs": [r[0] for r in rates[n]],
                                 "cpu_ms_per_image": med(n, 1),
                                 "speedup": med(n, 0) / med(0, 0), "cpu_ratio": med(0, 1) / med(n, 1)}
                                for n in sizes]}
    meta = {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "repeats": a.repeats, "threads": 1, "recipe": "train (RandomResizedCrop 224, DCT scaling on)"}
    lines = ["# Restart intervals: size overhead and train-recipe rate", "",
             f"{meta['date']}, {meta['machine']}; feedline's Python loader, 1 thread, train recipe; "
             f"median of {a.repeats} interleaved runs.", "",
             "CPU ms / image is the process's CPU time (loader thread and Python) over the timed window; on a "
             "shared machine it is the steadier figure, images/s also measures the neighbours.", ""]
    for name, t in table.items():
        lines += [f"## {name} ({t['images']} images)", "",
                  "| restart interval (MCUs) | packed MB | size vs no markers | images/s | runs | "
                  "rate vs no markers | CPU ms / image | CPU gain vs no markers |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in t["rows"]:
            label = "none" if r["interval"] == 0 else str(r["interval"])
            lines.append(f"| {label} | {r['bytes'] / 1e6:.1f} | {r['size_overhead_pct']:+.1f}% | "
                         f"{r['images_per_s']:.0f} | {', '.join(f'{x:.0f}' for x in r['runs'])} | "
                         f"{r['speedup']:.2f}x | {r['cpu_ms_per_image']:.2f} | {r['cpu_ratio']:.2f}x |")
        lines.append("")
    text = "\n".join(lines)
    print(text)
    bench_results.write("restart", {"meta": meta, "results": table}, text, quick=a.quick)


if __name__ == "__main__":
    main()
