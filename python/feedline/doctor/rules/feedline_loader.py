"""The feedline Loader model and its rules. Rules run in the order they are
defined here (registry.rule)."""
from __future__ import annotations

from typing import Any, Optional

from .common import (
    FL_IDLE,
    SIGNIFICANT,
    Ev,
    Finding,
    _finding,
    _loader_bound,
    _ms,
    _pct,
    current_rate,
    fair_share_cores,
    other_cores,
)
from .registry import model, rule


@model("feedline")
class FeedlineModel:
    """feedline's threads claim one sample at a time and write it straight
    into its batch, so the loader's period per sample is the per-sample op
    time divided by the threads actually running (at most the usable cores
    for the CPU part; reads may overlap beyond them)."""

    def __init__(self, ev: Ev) -> None:
        f, loop = ev["feedline"], ev["loop"]
        self.threads = max(1, int(f.get("num_threads") or 1))
        self.cores = max(1, int(ev["machine"].get("cores") or 1))
        self.ops: dict[str, dict[str, Any]] = {o["name"]: o for o in f.get("ops", [])}
        self.sample_s = sum(o["per_item_s"] for o in f.get("ops", []))
        self.read_s = self.ops.get("read", {}).get("per_item_s", 0.0)
        self.B = ev["loader"].get("batch_size") or 1
        self.step_s = loop.get("step_mean_s") or 0.0
        # The training thread's share of a core: its CPU per step over the
        # loop's period (the slower of the step and the loader).
        loader_period = self.B * self.sample_s / self.threads
        step_share = min(1.0, (loop.get("step_cpu_mean_s") or 0.0) / max(self.step_s, loader_period, 1e-9))
        # Other processes take cores, but at most their fair share by thread.
        ours = fair_share_cores(self.cores, other_cores(ev, self.cores), self.threads + 1)
        self.usable = max(1.0, ours - step_share)

    def capacity_rates(self) -> Optional[tuple[float, float]]:
        """The model's rate of the loader alone (no step) and of the loop;
        None without per-op times."""
        if not self.ops or self.sample_s <= 0:
            return None
        step_saved, self.step_s = self.step_s, 0.0
        loader = self.rate()
        self.step_s = step_saved
        return loader, self.rate()

    def rate(self, threads: Optional[int] = None, read_cut: float = 0.0) -> float:
        T = threads or self.threads
        per = max(1e-12, self.sample_s - read_cut)
        cpu = max(1e-12, per - (self.read_s - read_cut))
        loader = min(T / per, self.usable / cpu)
        step = self.B / self.step_s if self.step_s > 0 else float("inf")
        return min(loader, step)


def _fl_idle_share(f: dict[str, Any]) -> float:
    """The share of the threads' time spent idle: waiting for the next
    epoch's plan or for a free ring buffer. Time a thread is off the CPU
    between samples (a busy machine, handing the lock over) is not idleness:
    the thread had work and was not waiting for anything, so it lowers
    `utilisation` without saying that more threads would not help."""
    total = (f.get("num_threads") or 1) * (f.get("uptime_s") or 0.0)
    idle = (f.get("wait_input_s") or 0.0) + (f.get("blocked_output_s") or 0.0)
    return idle / total if total > 0 else 0.0


@rule("feedline")
def _fl_too_few_threads(ev: Ev, m: FeedlineModel) -> Optional[Finding]:
    if not _loader_bound(ev):
        return None
    f = ev["feedline"]
    util = f.get("utilisation") or 0
    k = max(m.threads, m.cores)  # feedline's threads are cheap: one per core, as num_threads="auto"
    # Threads idle half their time are not what the loop waits for.
    if k <= m.threads or _fl_idle_share(f) > FL_IDLE:
        return None
    pred = m.rate(threads=k)
    if pred < SIGNIFICANT * m.rate():
        return None
    return _finding(
        "too_few_workers", f"Too few threads: {m.threads} on {k} cores",
        f"The loader's {m.threads} thread(s) are busy {_pct(util)} of the time at {_ms(m.sample_s)} per sample.",
        f"feedline.Loader(..., num_threads={k}) (or \"auto\")",
        {"num_threads": m.threads, "recommended_threads": k, "utilisation": util, "per_sample_s": m.sample_s},
        pred, current_rate(ev), remedy="parallelism")


@rule("feedline")
def _fl_storage_bound(ev: Ev, m: FeedlineModel) -> Optional[Finding]:
    if not _loader_bound(ev) or m.sample_s <= 0 or m.read_s / m.sample_s < 0.3:
        return None
    src = ev["feedline"].get("source_kind")
    fix = ("Raise read_ahead_bytes / read_ahead_threads so more records are in flight." if src in ("packed", "url")
           else "Pack the dataset into shards (`feedline pack SRC OUT`) and read OUT: one read per record, "
                "read-ahead bounded in bytes.")
    return _finding(
        "storage_bound", "Storage-bound: reads take a large share of each sample",
        f"Reading takes {_ms(m.read_s)} of {_ms(m.sample_s)} per sample ({_pct(m.read_s / m.sample_s)}).",
        fix, {"read_per_sample_s": m.read_s, "per_sample_s": m.sample_s, "source_kind": src},
        m.rate(read_cut=m.read_s), current_rate(ev))


@rule("feedline")
def _fl_decode_bound(ev: Ev, m: FeedlineModel) -> Optional[Finding]:
    op = m.ops.get("decode_transform")
    if not _loader_bound(ev) or not op or m.sample_s <= 0 or op["per_item_s"] / m.sample_s < 0.6:
        return None
    exact = ev["feedline"].get("exact_decode")
    return _finding(
        "decode_bound", "Decode-bound: decoding and transforming images is the loader's work",
        f"The fused decode+transform takes {_ms(op['per_item_s'])} per image per thread "
        f"({_pct(op['per_item_s'] / m.sample_s)} of a sample).",
        ("Drop exact=True so decoding runs at reduced JPEG DCT scale; " if exact else "")
        + "store smaller images (short side about 1.15x the output), or give the loader more cores.",
        {"decode_transform_s": op["per_item_s"], "share": op["per_item_s"] / m.sample_s, "exact_decode": exact},
        None, current_rate(ev), severity="medium")


