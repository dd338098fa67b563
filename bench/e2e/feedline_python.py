"""feedline's Python loader on one configuration; prints one JSON line in the
same shape as `feedline bench-pipeline`, so image_bench.py can put the
Python path beside the C++ one and the peer. CPU time covers the timed
window only (getrusage of the whole process: all loader threads)."""
import argparse
import json
import os
import resource
import time

import feedline


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--recipe", choices=["train", "eval"], default="train")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--batches", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    a = p.parse_args()
    transform = feedline.transforms.imagenet_train() if a.recipe == "train" else feedline.transforms.imagenet_eval()
    t_create = time.perf_counter()
    # The same pipeline as bench-pipeline: 3 batches in production or ready,
    # drop_last, seed 1. The C++ runner releases its batch before asking for
    # the next; a Python loop holds one, hence prefetch_batches=3 (4 buffers).
    loader = feedline.Loader(a.data, batch_size=a.batch, transform=transform, shuffle=a.recipe == "train",
                             seed=1, drop_last=True, num_threads=a.threads, prefetch_batches=3)
    got, images, first_batch_s = 0, 0, 0.0
    t0 = cpu0 = None
    while got < a.warmup + a.batches:
        it = iter(loader)
        while True:
            s = time.perf_counter()
            batch = next(it, None)
            if batch is None:
                break
            x, y = batch
            if got == 0:
                first_batch_s = time.perf_counter() - t_create
            got += 1
            if got == a.warmup:
                t0, cpu0 = time.perf_counter(), cpu_seconds()
            elif got > a.warmup:
                images += x.shape[0]
            if got == a.warmup + a.batches:
                break
    seconds = time.perf_counter() - t0
    cpu = cpu_seconds() - cpu0
    # Per-batch Python overhead: handing over batches that are already
    # ready, back to back (the first call after an idle wait also pays the
    # CPU's wake-up, so it is not counted).
    loader.set_epoch(0)
    it = iter(loader)
    next(it)
    time.sleep(2.0)  # let the ring fill
    next(it)
    times = []
    for _ in range(2):
        s = time.perf_counter()
        next(it)
        times.append(time.perf_counter() - s)
    overhead_us = min(times) * 1e6
    loader.close()
    print(json.dumps({"mode": "python", "recipe": a.recipe, "threads": a.threads, "batch": a.batch,
                      "images": images, "seconds": round(seconds, 4), "images_per_s": round(images / seconds, 1),
                      "cpu_s": round(cpu, 3), "first_batch_s": round(first_batch_s, 4),
                      "ready_batch_overhead_us": round(overhead_us, 1)}))


if __name__ == "__main__":
    main()
