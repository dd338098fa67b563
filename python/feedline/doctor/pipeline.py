"""The pipeline alone: runs a feedline Loader over DATA with no training
step at several thread counts and measures what it delivers, per stage from
the engine's metrics. This is what `python3 -m feedline.doctor DATA` (and
`feedline doctor DATA`) runs; the diagnosis is rules.diagnose_pipeline."""
import time

from . import rules
from .feedline_loader import source_kind, stats_delta
from ._report import SCHEMA, SCHEMA_VERSION, machine_info

_NOW = time.perf_counter


def make_transform(name, size):
    from .. import transforms
    if name == "train":
        return transforms.imagenet_train(size)
    if name == "eval":
        return transforms.imagenet_eval(size, resize=round(size * 256 / 224))
    raise ValueError(f"transform must be 'train' or 'eval', got {name!r}")


def measure(source, threads, batch_size=64, transform="train", size=224, batches=20, warmup=2):
    """One thread count: {"threads", "samples_per_s", "batches", "stages",
    "utilisation", "waits"} where waits are (start_s, wait_s) per timed batch
    and stages are per-sample op times from the engine's metrics."""
    from ..loader import Loader
    loader = Loader(source, batch_size=batch_size, transform=make_transform(transform, size), shuffle=True,
                    num_threads=threads)
    try:
        def batches_forever():
            while True:
                got = False
                for b in loader:
                    got = True
                    yield b
                if not got:
                    return
        it = batches_forever()
        for _ in range(warmup):
            next(it)
        s0 = loader.stats()
        t0 = _NOW()
        samples, waits = 0, []
        for _ in range(batches):
            t = _NOW()
            images, _labels = next(it)
            waits.append((t - t0, _NOW() - t))
            samples += int(images.shape[0])
            del images, _labels
        wall = _NOW() - t0
        delta = stats_delta(s0, loader.stats())
        it.close()
    finally:
        loader.close()
    return {"threads": threads, "samples": samples,
            "seconds": wall, "samples_per_s": samples / wall if wall > 0 else 0.0,
            "stages": [{"name": o["name"], "per_sample_s": o["per_item_s"]} for o in delta["ops"]],
            "utilisation": delta["utilisation"], "waits": [[round(a, 6), round(b, 6)] for a, b in waits]}


def scan(source, threads=(1, 2), batch_size=64, transform="train", size=224, batches=20, warmup=2,
         target_rate=None, progress=None):
    """Measures each thread count and diagnoses: the report dict (mode
    "pipeline", docs/doctor.md)."""
    runs = []
    for k in threads:
        if progress:
            progress(f"measuring {k} thread(s)...")
        run = measure(source, k, batch_size, transform, size, batches, warmup)
        run["threads"] = k
        runs.append(run)
    ev = {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "mode": "pipeline", "created_unix": time.time(),
          "machine": machine_info(),
          "loader": {"kind": "feedline", "type": "Loader", "batch_size": batch_size,
                     "settings": {"batch_size": batch_size, "transform": transform, "size": size,
                                  "source_kind": source_kind(str(source))}},
          "scan": runs}
    findings, summary = rules.diagnose_pipeline(ev, target_rate)
    best = max(runs, key=lambda r: r["samples_per_s"])
    ev["pipeline"] = {"source": str(source), "batch_size": batch_size, "transform": transform, "size": size,
                      "batches": batches, "summary": summary}
    ev["stages"] = [{"name": s["name"], "where": "engine", "per_batch_s": s["per_sample_s"] * batch_size,
                     "cpu_s": None, "blocked_s": None} for s in best["stages"]]
    ev["capacity"] = {"loader_samples_per_s": {"value": best["samples_per_s"], "source": "measured"},
                      "step_samples_per_s": {"value": target_rate, "source": "target" if target_rate else None},
                      "loop_samples_per_s": None, "bound": None}
    for i, f in enumerate(findings):
        f["rank"] = i + 1
    ev["findings"] = findings
    return ev
