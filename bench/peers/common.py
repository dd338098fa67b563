"""What every peer process of `make bench-peers` shares: the arguments, the
file list, the recipes' constants, the timed loop and its one JSON line.

A peer module provides `make(args, files, labels)` returning an iterable of
batches and `to_numpy(batch)` giving the image array of a batch (float32,
normalised) with its layout ("NCHW" or "NHWC"). The loop here:
  * time to first batch: from just before the peer builds its loader to the
    first batch in hand (worker, thread-pool and pipeline start-up included);
  * `--warmup` batches, then `--batches` timed ones, re-iterating the
    loader (the next epoch) where an epoch ends;
  * CPU seconds over the timed window for this process and every process
    below it (utime + stime from /proc: all threads and workers);
  * the sanity statistics (per-channel mean and std, shape, dtype) from the
    first batch (and `--stats-batches` - 1 after the window), outside it.
Only numpy and the standard library here (and in bench/common, imported by
path): every peer's environment has them.
"""
import argparse
import json
import os
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from bench.common.procfs import CpuClock  # noqa: E402

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
EXTENSIONS = (".jpg", ".jpeg", ".png")


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--recipe", choices=["train", "eval"], required=True)
    p.add_argument("--cores", type=int, default=os.cpu_count())
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--stats-batches", type=int, default=1, help="batches after the window for the output check")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--beton", help="FFCV: the .beton file of --data")
    return p.parse_args()


def image_folder(root):
    """(files, labels) in torchvision ImageFolder's order: sorted class
    folders, sorted files in each (every peer reads the same list)."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    files, labels = [], []
    for label, c in enumerate(classes):
        for dirpath, dirnames, names in sorted(os.walk(os.path.join(root, c), followlinks=True)):
            dirnames.sort()
            for n in sorted(names):
                if n.lower().endswith(EXTENSIONS):
                    files.append(os.path.join(dirpath, n))
                    labels.append(label)
    if not files:
        raise SystemExit(f"{root}: no images")
    return files, labels


def channel_stats(x, layout):
    """Per-channel mean and std, image by image in float64 (no batch-sized
    temporaries, which would show in the peak memory)."""
    x = np.asarray(x)
    if layout == "NHWC":
        x = x.transpose(0, 3, 1, 2)
    s = np.zeros(3)
    s2 = np.zeros(3)
    for img in x:
        v = img.reshape(3, -1).astype(np.float64)
        s += v.sum(axis=1)
        s2 += (v * v).sum(axis=1)
    n = x.shape[0] * x.shape[2] * x.shape[3]
    mean = s / n
    shape = list(np.shape(x) if layout == "NCHW" else (x.shape[0], x.shape[2], x.shape[3], 3))
    return mean.tolist(), np.sqrt(np.maximum(s2 / n - mean * mean, 0)).tolist(), shape, str(x.dtype)


def run(name, make, to_numpy, version):
    a = parse_args()
    if a.warmup < 1 or a.stats_batches < 1:
        raise SystemExit("--warmup and --stats-batches must be >= 1")
    files, labels = image_folder(a.data)
    t_create = time.perf_counter()
    loader = make(a, files, labels)
    it = [iter(loader), 0]

    def next_batch():
        # The next batch, re-iterating the loader (the next epoch) where an
        # epoch ends.
        while True:
            for batch in it[0]:
                it[1] += 1
                return batch
            if it[1] == 0:
                raise SystemExit(f"{name}: the loader yielded no batch (dataset smaller than one batch?)")
            it[0], it[1] = iter(loader), 0

    x, layout = to_numpy(next_batch())
    first_batch_s = time.perf_counter() - t_create
    # The output check on the first batch: the same images for every peer
    # that keeps the file order (eval). Its short stall is drained by the
    # warm-up: from here to the end of the timed window the consumer takes
    # every batch at once, so the window measures the steady rate.
    m, sd, shape, dtype = channel_stats(x, layout)
    sums = [(m, sd)]
    del x
    for _ in range(a.warmup - 1):
        next_batch()
    clock = CpuClock()
    t0, cpu0 = time.perf_counter(), clock.sample()
    for _ in range(a.batches):
        next_batch()
        clock.sample()
    seconds = time.perf_counter() - t0
    cpu = clock.sample() - cpu0
    images = a.batches * a.batch
    for _ in range(a.stats_batches - 1):
        x, layout = to_numpy(next_batch())
        m, sd, shape, dtype = channel_stats(x, layout)
        sums.append((m, sd))
    mean = np.mean([m for m, _ in sums], axis=0).tolist()
    std = np.mean([s for _, s in sums], axis=0).tolist()
    print(json.dumps({"peer": name, "version": version, "recipe": a.recipe, "cores": a.cores, "batch": a.batch,
                      "images": images, "seconds": round(seconds, 4), "images_per_s": round(images / seconds, 1),
                      "cpu_s": round(cpu, 3), "first_batch_s": round(first_batch_s, 4),
                      "mean": [round(v, 4) for v in mean], "std": [round(v, 4) for v in std],
                      "shape": shape, "dtype": dtype, "layout": layout, "python": sys.version.split()[0]}))
    sys.stdout.flush()
    # Persistent workers and pipeline threads can take seconds to wind down;
    # the result is out, so do not let a slow teardown count anywhere.
    os._exit(0)


def rrc_params(rng, width, height, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """RandomResizedCrop's parameters as torchvision draws them (10 tries,
    then the central crop of the clamped ratio): (left, top, w, h). For the
    peers whose library has no such op of its own (SPDL, Grain)."""
    area = width * height
    log_ratio = (np.log(ratio[0]), np.log(ratio[1]))
    for _ in range(10):
        target = area * rng.uniform(*scale)
        aspect = np.exp(rng.uniform(*log_ratio))
        w = int(round(np.sqrt(target * aspect)))
        h = int(round(np.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1)), w, h
    in_ratio = width / height
    if in_ratio < ratio[0]:
        w, h = width, int(round(width / ratio[0]))
    elif in_ratio > ratio[1]:
        h, w = height, int(round(height * ratio[1]))
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h


def eval_size(width, height, short=256):
    """Resize(256)'s output size (torchvision: the short side to 256, the
    long side truncated)."""
    if width <= height:
        return short, int(short * height / width)
    return int(short * width / height), short
