"""The feedline Loader model and its rules. Rules run in the order they are
defined here (registry.rule)."""
from __future__ import annotations

from typing import Any, Optional

from .common import (
    FL_IDLE,
    PYTHON_OPS_DOMINATE,
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
    for the CPU part; reads may overlap beyond them). Python ops never
    overlap (one lock and the GIL; docs/python_ops.md), so the time they hold
    the GIL per sample is a floor on the period that no thread count lowers;
    their time waiting for it is not work and is left out of the sample's."""

    def __init__(self, ev: Ev) -> None:
        f, loop = ev["feedline"], ev["loop"]
        self.threads = max(1, int(f.get("num_threads") or 1))
        self.cores = max(1, int(ev["machine"].get("cores") or 1))
        self.ops: dict[str, dict[str, Any]] = {o["name"]: o for o in f.get("ops", [])}
        self.op_s = {o["name"]: _work_per_item(o) for o in f.get("ops", [])}
        self.sample_s = sum(self.op_s.values())
        self.python_ops = [o for o in f.get("ops", []) if o.get("python")]
        self.python_s = sum(self.op_s[o["name"]] for o in self.python_ops)
        self.held_s = sum(_per_item(o, "gil_held_s") for o in self.python_ops)
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

    def rate(self, threads: Optional[int] = None, read_cut: float = 0.0, python_cut: bool = False,
             python_parallel: bool = False) -> float:
        """The loop's rate with `threads`, reads `read_cut` shorter per
        sample, and (python_cut) the Python ops' work gone, or
        (python_parallel) their work kept but no longer serial (in worker
        processes: python_workers=; they share the same cores)."""
        T = threads or self.threads
        per = max(1e-12, self.sample_s - read_cut - (self.python_s if python_cut else 0.0))
        cpu = max(1e-12, per - (self.read_s - read_cut))
        loader = min(T / per, self.usable / cpu)
        if self.held_s > 0 and not python_cut and not python_parallel:
            loader = min(loader, 1.0 / self.held_s)  # serial: one Python op at a time
        step = self.B / self.step_s if self.step_s > 0 else float("inf")
        return min(loader, step)


def _per_item(o: dict[str, Any], key: str) -> float:
    return (o.get(key) or 0.0) / o["items"] if o.get("items") else 0.0


def _work_per_item(o: dict[str, Any]) -> float:
    """An op's busy time per item; for a Python op, the time it held the GIL:
    the rest of its busy time is waiting (for the Python-op lock and the GIL,
    and for handing the GIL back, which CPython makes a releasing thread wait
    for when another asked for it), which grows with the threads while the
    work does not."""
    if o.get("python") and o.get("gil_held_s") is not None:
        return _per_item(o, "gil_held_s")
    return o["per_item_s"]


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
    f = ev["feedline"]
    src = f.get("source_kind")
    store = f.get("object_store")
    facts = {"read_per_sample_s": m.read_s, "per_sample_s": m.sample_s, "source_kind": src}
    predicted = m.rate(read_cut=m.read_s)
    if store and store.get("requests"):
        return _object_store_bound(ev, m, store, facts, predicted)
    remote = str((ev["loader"].get("settings") or {}).get("source", "")).startswith(("http://", "https://"))
    fix = ("Raise read_ahead_bytes / read_ahead_threads so more records are in flight."
           if src == "shards" and remote else
           "Pack the dataset into shards (`feedline pack SRC OUT`) and read OUT: one read per record, "
           "read-ahead bounded in bytes.")
    return _finding(
        "storage_bound", "Storage-bound: reads take a large share of each sample",
        f"Reading takes {_ms(m.read_s)} of {_ms(m.sample_s)} per sample ({_pct(m.read_s / m.sample_s)}).",
        fix, facts, predicted, current_rate(ev))


def _object_store_bound(ev: Ev, m: FeedlineModel, store: dict[str, Any], facts: dict[str, Any],
                        predicted: float) -> Finding:
    """Reads from a bucket: by Little's law the requests in flight that hide
    them are the rate wanted times the request time per sample; that is the
    read-ahead to prescribe (and its bytes, two samples' worth per fetch)."""
    import math
    samples = max(1, int(ev["feedline"].get("samples") or 1))
    req_per_sample = store["requests"] / samples
    req_s_per_sample = req_per_sample * store["request_s"]
    need = max(1, math.ceil(1.25 * predicted * req_s_per_sample))
    per_sample_bytes = store["bytes"] / samples
    bytes_needed = max(64 << 20, int(2 * need * per_sample_bytes))
    facts.update(first_byte_s=store["first_byte_s"], request_s=store["request_s"],
                 bytes_per_s_per_connection=store["bytes_per_s_per_connection"],
                 concurrency_in_use=store["concurrency"], requests_per_sample=req_per_sample,
                 retries=store["retries"], recommended_read_ahead_threads=need,
                 recommended_read_ahead_bytes=bytes_needed)
    summary = (f"Reading from the object store takes {_ms(m.read_s)} of {_ms(m.sample_s)} per sample "
               f"({_pct(m.read_s / m.sample_s)}): {req_per_sample:.2f} requests per sample of "
               f"{_ms(store['request_s'])} each (first byte after {_ms(store['first_byte_s'])}, "
               f"{store['bytes_per_s_per_connection'] / 1e6:.1f} MB/s per connection), "
               f"{store['concurrency']:.1f} in flight on average.")
    if store["retries"]:
        summary += f" {store['retries']} requests were retried (503 SlowDown, resets)."
    fix = (f"feedline.Loader(..., read_ahead_threads={need}, read_ahead_bytes={bytes_needed}): about "
           f"{need} requests in flight hide {_ms(store['request_s'])} each at the rate the loader can "
           "decode (Little's law)")
    return _finding("storage_bound", "Storage-bound: object-store requests take a large share of each sample",
                    summary, fix, facts, predicted, current_rate(ev), remedy="parallelism")


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




@rule("feedline")
def _fl_python_ops_dominate(ev: Ev, m: FeedlineModel) -> Optional[Finding]:
    """Python ops hold the GIL for most of a sample's work: their share is
    serial, so threads cannot scale it (Amdahl: at most 1/share over one
    thread). The measure is the loader's own counters: gil_held_s against
    the sample's work (native ops' busy time plus Python ops' held time)."""
    if not _loader_bound(ev) or m.held_s <= 0 or m.sample_s <= 0:
        return None
    share = m.held_s / m.sample_s
    if share < PYTHON_OPS_DOMINATE:
        return None
    f = ev["feedline"]
    uptime = f.get("uptime_s") or 0.0
    held_total = sum(o.get("gil_held_s") or 0.0 for o in m.python_ops)
    lane = held_total / uptime if uptime > 0 else None
    names = [o["name"] for o in m.python_ops]
    members = (ev["loader"].get("settings") or {}).get("python_members") or []
    movable = [p for p in members if p.get("native")]
    user = [p for p in members if not p.get("native")]
    settings = ev["loader"].get("settings") or {}
    in_processes = bool(settings.get("python_workers"))
    fixes = []
    pred_workers = None
    if (user or not members) and not in_processes:
        k = max(2, int(round(m.usable)))
        fixes.append(f"run the Python members in worker processes: feedline.Loader(..., python_workers={k}, "
                     f"num_threads={max(m.threads, k)}) (one per usable core; pixels go through shared memory, "
                     "the batches stay byte-identical; docs/python_ops.md)")
        # The threads wait on the workers' sockets: at least one per worker.
        pred_workers = m.rate(threads=max(m.threads, k), python_parallel=True)
    if movable:
        fixes.append("feedline runs " + ", ".join(p["torchvision"] for p in movable) + " natively: it is in "
                     "Python only because it comes after a Python member; move it before the first Python member "
                     "(if the order does not matter to you) and it joins the native prefix")
    if user or not members:
        what = ", ".join(p.get("name") or p["member"] for p in user) if user else ", ".join(names)
        fixes.append(("or make " if fixes else "make ") + f"{what} cheaper, or apply it to whole batches with "
                     "batch_map= (one call per batch; "
                     "torch kernels release the GIL), or on the accelerator after the loader; map= runs under the "
                     "same lock, so it does not scale either")
    # Measurable only when the op has a native equivalent: the rate with
    # the Python work gone is then an upper bound (the native op costs a
    # little). A user op has no known replacement, so no prediction.
    pred = m.rate(python_cut=True) if movable and not user else pred_workers
    lane_text = f", and one of them held it {_pct(lane)} of the wall-clock time" if lane is not None else ""
    return _finding(
        "python_ops_dominate", "Python ops dominate: threads cannot scale the loader",
        f"Python op(s) {', '.join(names)} held the GIL {_ms(m.held_s)} per sample, {_pct(share)} of the "
        f"{_ms(m.sample_s)} of work per sample (busy time, a Python op's counted as its time holding the GIL)"
        f"{lane_text}. Only one Python op runs at a time, so the loader is capped near "
        f"{1.0 / m.held_s:,.0f} samples/s at any thread count.",
        "; ".join(fixes) + ".",
        {"python_ops": names, "gil_held_per_sample_s": m.held_s, "work_per_sample_s": m.sample_s,
         "gil_held_share": share, "gil_held_wall_share": lane,
         "gil_wait_s": sum(o.get("gil_wait_s") or 0.0 for o in m.python_ops),
         "python_members": members, "serial_cap_samples_per_s": 1.0 / m.held_s,
         "recommended_python_workers": max(2, int(round(m.usable))) if pred_workers is not None else None},
        pred, current_rate(ev), severity=None if pred else "high")
