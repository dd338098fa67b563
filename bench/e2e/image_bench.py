"""Image pipelines, feedline vs the peer (torch DataLoader + torchvision on
PIL), side by side in one run, on the same generated dataset and cores.

Each configuration runs as its own process, `--repeats` times; we report
the median and spread of images/s, CPU-seconds per 1000 images (over the
timed window, all threads and worker processes), peak memory of the whole
process tree (PSS: a page shared by forked workers counts once), and time
to the first batch. Results go to bench/results/image_pipeline.{md,json}.

    /usr/bin/python3 bench/e2e/image_bench.py [--images 2000] [--repeats 3] [--quick]
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
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
FEEDLINE = os.environ.get("FEEDLINE_BIN", str(ROOT / "build" / "tools" / "feedline"))
PYTHON = "/usr/bin/python3"
sys.path.insert(0, str(ROOT))
from bench.common import procfs  # noqa: E402
from bench.common import results as bench_results  # noqa: E402


def run(cmd):
    """Runs cmd, sampling the PSS of its process tree; returns (json, peak bytes)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "build" / "python"))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak = [0]
    done = threading.Event()

    def sample():
        start = time.monotonic()
        while not done.is_set():
            peak[0] = max(peak[0], procfs.pss_bytes(procfs.tree_pids(proc.pid)))
            # Dense at first (short runs), then sparse: reading smaps costs CPU
            # the measured runs compete for.
            time.sleep(0.02 if time.monotonic() - start < 1.0 else 0.1)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, err = proc.communicate(timeout=900)
    done.set()
    t.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {err.strip()}")
    return json.loads(out.strip().splitlines()[-1]), peak[0]


def ensure_dataset(images):
    path = ROOT / "bench" / "data" / f"imagenet-like-{images}"
    if not (path / "class_0000").exists():
        subprocess.run([FEEDLINE, "gen-dataset", str(path), "--images", str(images), "--classes", "10"],
                       check=True, cwd=ROOT)
    return path


def summarize(name, runs):
    rates = [r["images_per_s"] for r, _ in runs]
    cpu = [1000 * r["cpu_s"] / r["images"] for r, _ in runs]
    return {"name": name, "images_per_s": statistics.median(rates), "min": min(rates), "max": max(rates),
            "cpu_s_per_1000": statistics.median(cpu), "peak_mib": max(p for _, p in runs) / 2**20,
            "first_batch_s": statistics.median(r.get("first_batch_s", 0) for r, _ in runs),
            "runs": [r for r, _ in runs]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--quick", action="store_true", help="CI smoke: tiny dataset, one repeat")
    a = ap.parse_args()
    if a.quick:
        a.images, a.repeats, a.batches = 300, 1, 2
    cores = os.cpu_count()
    batch = 256 if not a.quick else 32
    data = ensure_dataset(a.images)
    # Warm-up covers the ring's lazy allocation (first touch of 150 MB batch
    # buffers) and the peer's worker start-up.
    common = ["--batch", str(batch), "--batches", str(a.batches), "--warmup", "1" if a.quick else "3"]
    configs = {
        "train/feedline": [FEEDLINE, "bench-pipeline", str(data), "--recipe", "train",
                           "--threads", str(cores)] + common,
        "train/feedline-python": [PYTHON, str(ROOT / "bench/e2e/feedline_python.py"), "--data", str(data),
                                  "--recipe", "train", "--threads", str(cores)] + common,
        "train/torch": [PYTHON, str(ROOT / "bench/e2e/torch_peer.py"), "--data", str(data), "--recipe", "train",
                        "--workers", str(cores)] + common,
        "eval/feedline": [FEEDLINE, "bench-pipeline", str(data), "--recipe", "eval", "--threads", str(cores)] + common,
        "eval/torch": [PYTHON, str(ROOT / "bench/e2e/torch_peer.py"), "--data", str(data), "--recipe", "eval",
                       "--workers", str(cores)] + common,
        # Two warm-up batches: one thread's ring holds two buffers, and the second is first touched
        # (~37,000 page faults for 256 float images) by the second batch.
        "1core/feedline-train": [FEEDLINE, "bench-pipeline", str(data), "--recipe", "train", "--threads", "1",
                                 "--batch", str(batch), "--batches", str(max(2, a.batches // 2)),
                                 "--warmup", "1" if a.quick else "2"],
        "1core/full-decode": [FEEDLINE, "bench-pipeline", str(data), "--mode", "decode",
                              "--images", str(min(a.images, 1500))],
    }
    results = {}
    for _rep in range(a.repeats):
        for name, cmd in configs.items():  # interleaved, so drift hits all alike
            results.setdefault(name, []).append(run(cmd))
    table = {name: summarize(name, runs) for name, runs in results.items()}

    def ratio(num, den, key):
        return table[num][key] / table[den][key]

    ratios = {
        "train: feedline / torch images/s": ratio("train/feedline", "train/torch", "images_per_s"),
        "eval: feedline / torch images/s": ratio("eval/feedline", "eval/torch", "images_per_s"),
        "train: torch / feedline CPU per image": ratio("train/torch", "train/feedline", "cpu_s_per_1000"),
        "train: torch / feedline peak memory": ratio("train/torch", "train/feedline", "peak_mib"),
        "train: torch / feedline-python peak memory (both processes import torch)":
            ratio("train/torch", "train/feedline-python", "peak_mib"),
        "train: feedline Python / C++ images/s": ratio("train/feedline-python", "train/feedline", "images_per_s"),
        "1 core: feedline train / full decode images/s":
            ratio("1core/feedline-train", "1core/full-decode", "images_per_s"),
    }
    meta = {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {cores} cores",
            "dataset": f"{a.images} generated ImageNet-like images ({data.name})", "batch": batch,
            "repeats": a.repeats, "python": sys.version.split()[0]}
    lines = ["# Image pipelines: feedline vs torch DataLoader + torchvision",
             "", f"{meta['date']}, {meta['machine']}, {meta['dataset']}, batch {batch}, "
             f"median of {a.repeats} (spread min-max).", "",
             "| configuration | images/s | spread | CPU-s / 1000 images | peak memory (PSS) | first batch |",
             "|---|---|---|---|---|---|"]
    for name, r in table.items():
        lines.append(f"| {name} | {r['images_per_s']:.0f} | {r['min']:.0f}-{r['max']:.0f} | "
                     f"{r['cpu_s_per_1000']:.2f} | {r['peak_mib']:.0f} MiB | {r['first_batch_s']:.2f} s |")
    lines += ["", "| ratio | value |", "|---|---|"] + [f"| {k} | {v:.2f}x |" for k, v in ratios.items()]
    overhead = statistics.median(r["ready_batch_overhead_us"] for r in table["train/feedline-python"]["runs"])
    lines += ["", f"Python hand-over of a ready batch (numpy views -> torch tensors): {overhead:.0f} us median."]
    text = "\n".join(lines) + "\n"
    print(text)
    bench_results.write("image_pipeline", {"meta": meta, "results": table, "ratios": ratios}, text, quick=a.quick)


if __name__ == "__main__":
    main()
