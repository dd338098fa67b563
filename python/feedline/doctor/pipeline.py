"""The pipeline alone: runs a feedline Loader over DATA with no training
step at several thread counts and measures what it delivers, per stage from
the engine's metrics. This is what `python3 -m feedline.doctor DATA` (and
`feedline doctor DATA`) runs; the diagnosis is rules.diagnose_pipeline."""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Generator, Optional, Sequence, Union

from . import rules
from ._report import SCHEMA, SCHEMA_VERSION, machine_info
from .evidence import Capacity, Estimate, Evidence, LoaderInfo, PipelineInfo, ScanRun, Stage, StageTime
from .feedline_loader import source_kind, stats_delta

_NOW = time.perf_counter
Source = Union[str, os.PathLike[str]]


def make_transform(name: str, size: int) -> Any:
    from .. import transforms
    if name == "train":
        return transforms.imagenet_train(size)
    if name == "eval":
        return transforms.imagenet_eval(size, resize=round(size * 256 / 224))
    raise ValueError(f"transform must be 'train' or 'eval', got {name!r}")


def measure(source: Source, threads: int, batch_size: int = 64, transform: str = "train", size: int = 224,
            batches: int = 20, warmup: int = 2) -> ScanRun:
    """One thread count: {"threads", "samples_per_s", "batches", "stages",
    "utilisation", "waits"} where waits are (start_s, wait_s) per timed batch
    and stages are per-sample op times from the engine's metrics."""
    from ..loader import Loader
    loader = Loader(source, batch_size=batch_size, transform=make_transform(transform, size), shuffle=True,
                    num_threads=threads)
    try:
        def batches_forever() -> Generator[Any, None, None]:
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
        samples = 0
        waits: list[tuple[float, float]] = []
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
    return ScanRun(threads=threads, samples=samples,
                   seconds=wall, samples_per_s=samples / wall if wall > 0 else 0.0,
                   stages=[StageTime(name=o.name, per_sample_s=o.per_item_s) for o in delta.ops],
                   utilisation=delta.utilisation, waits=[[round(a, 6), round(b, 6)] for a, b in waits])


def scan(source: Source, threads: Sequence[int] = (1, 2), batch_size: int = 64, transform: str = "train",
         size: int = 224, batches: int = 20, warmup: int = 2, target_rate: Optional[float] = None,
         progress: Optional[Callable[[str], Any]] = None) -> dict[str, Any]:
    """Measures each thread count and diagnoses: the report dict (mode
    "pipeline", docs/doctor.md)."""
    runs = []
    for k in threads:
        if progress:
            progress(f"measuring {k} thread(s)...")
        run = measure(source, k, batch_size, transform, size, batches, warmup)
        run.threads = k
        runs.append(run)
    ev = Evidence(schema=SCHEMA, schema_version=SCHEMA_VERSION, mode="pipeline", created_unix=time.time(),
                  machine=machine_info(),
                  loader=LoaderInfo(kind="feedline", type="Loader", batch_size=batch_size,
                                    settings={"batch_size": batch_size, "transform": transform, "size": size,
                                              "source_kind": source_kind(str(source))}),
                  scan=runs)
    findings, summary = rules.diagnose_pipeline(ev.to_json(), target_rate)
    best = max(runs, key=lambda r: r.samples_per_s)
    ev.pipeline = PipelineInfo(source=str(source), batch_size=batch_size, transform=transform, size=size,
                               batches=batches, summary=summary)
    ev.stages = [Stage(name=s.name, where="engine", per_batch_s=s.per_sample_s * batch_size) for s in best.stages]
    ev.capacity = Capacity(loop_samples_per_s=None, bound=None,
                           loader_samples_per_s=Estimate(value=best.samples_per_s, source="measured"),
                           step_samples_per_s=Estimate(value=target_rate, source="target" if target_rate else None))
    for i, f in enumerate(findings):
        f["rank"] = i + 1
    ev.findings = findings
    return ev.to_json()
