"""The torch DataLoader model and its rules (the package docstring has the
model). Rules run in the order they are defined here (registry.rule)."""
from __future__ import annotations

import math
from typing import Any, Optional

from .common import (
    COLLATE_BYTES_PER_S,
    COPY_ON_READ_BYTES,
    DECODE_FIXED_S,
    DEFAULT_RECEIVE_S,
    LARGE_BATCH,
    RECEIVE_BYTES_PER_S,
    SIGNIFICANT,
    STARTUP_SHARE,
    STORE_MARGIN,
    WAIT_WORKERS_PER_CORE,
    Ev,
    Finding,
    _finding,
    _loader_bound,
    _ms,
    _pct,
    _starvation,
    current_rate,
    fair_share_cores,
    other_cores,
    starvation_window,
)
from .registry import model, rule


@model("torch")
class TorchModel:
    """The period model of a torch DataLoader loop (module docstring)."""

    def __init__(self, ev: Ev) -> None:
        t, loop, machine = ev["torch"], ev["loop"], ev["machine"]
        s = ev["loader"]["settings"]
        self.n = int(s.get("num_workers") or 0)
        self.cores = max(1, int(machine.get("cores") or 1))
        # Cores other processes kept busy meanwhile (see period()).
        self.other_cores = other_cores(ev, self.cores)
        # Samples per batch, as the loop counts them: batch_size, unless each
        # dataset call makes many samples (batch_size=None, or items that are
        # already batches), then the batches' own size.
        spb, bs = t.get("samples_per_batch") or 1, ev["loader"].get("batch_size")
        self.B: float = bs if bs and spb <= 1.5 * bs else max(1, round(spb))
        sm, bt = t["sample"], t["batch"]
        self.sample_s = sm["wall_s"] - sm["runq_s"]   # without waits for a core
        self.sample_cpu_s = sm["cpu_s"]
        self.collate_s = bt["collate_s"] - bt.get("collate_runq_s", 0.0)
        self.collate_cpu_s = bt.get("collate_cpu_s", 0.0)
        # Per batch, beyond its samples and collate: CPU time anywhere in the
        # worker process (the queue's feeder thread pickling the batch and
        # sharing its tensors). It holds the GIL, so it is on the worker's
        # critical path too. (The gap between batches would say the same in a
        # busy worker, but in an idle one it is mostly waiting for work.)
        self.overhead_s = max(0.0, bt.get("worker_overhead_s", 0.0)) + (bt.get("worker_hidden_cpu_s") or 0.0)
        self.overhead_cpu_s = self.overhead_s
        self.pin_s = bt.get("pin_s") or 0.0
        self.default_collate = s.get("collate_fn") in (None, "default_collate")
        self.step_s = loop.get("step_mean_s") or 0.0
        self.step_cpu_s = loop.get("step_cpu_mean_s") or 0.0
        # The training process's own CPU per batch (step, receiving, pinning).
        self.main_cpu_s = loop.get("process_cpu_mean_s") or self.step_cpu_s
        self.receive_s: Optional[float] = bt.get("receive_s")
        self.receive_cpu_s = loop.get("receive_cpu_mean_s") or 0.0
        self.batch_bytes = bt.get("bytes") or 0
        if self.n == 0 or self.receive_s is None:
            self.receive_s = None

    def collate_at(self, B: float, seconds: float) -> float:
        """Collate time at batch size B. torch's default collate: a fixed
        part plus copying the batch's bytes (at COLLATE_BYTES_PER_S), which
        grows with B; a custom collate_fn: in proportion to B (its fixed part
        is unknown, so no batch size is credited with amortising it)."""
        if not self.default_collate:
            return seconds * (B / self.B)
        copy = min(seconds, self.batch_bytes / COLLATE_BYTES_PER_S)
        return seconds - copy + copy * (B / self.B)

    def default_receive_s(self, B: Optional[float] = None) -> float:
        b = self.batch_bytes * ((B or self.B) / self.B)
        return DEFAULT_RECEIVE_S + b / RECEIVE_BYTES_PER_S

    def worker_batch(self, B: Optional[float] = None, sample_cut: float = 0.0, sample_cut_cpu: float = 0.0,
                     collate: Optional[float] = None, collate_cpu: Optional[float] = None) -> tuple[float, float]:
        """(wall, cpu) of one batch in one worker."""
        B = B or self.B
        c = self.collate_at(B, self.collate_s) if collate is None else collate
        c_cpu = self.collate_at(B, self.collate_cpu_s) if collate_cpu is None else collate_cpu
        wall = B * max(0.0, self.sample_s - sample_cut) + c + self.overhead_s
        cpu = B * max(0.0, self.sample_cpu_s - sample_cut_cpu) + c_cpu + self.overhead_cpu_s
        return wall, cpu

    def period(self, n: Optional[int] = None, B: Optional[float] = None, sample_cut: float = 0.0,
               sample_cut_cpu: float = 0.0, collate: Optional[float] = None, collate_cpu: Optional[float] = None,
               step: Optional[float] = None, receive: Optional[float] = None,
               pin: Optional[float] = None) -> tuple[float, str]:
        """(seconds per batch, name of the bounding stage) for changed inputs."""
        n = self.n if n is None else n
        B = B or self.B
        step = self.step_s * (B / self.B) if step is None else step
        pin = self.pin_s * (B / self.B) if pin is None else pin
        wall, cpu = self.worker_batch(B, sample_cut, sample_cut_cpu, collate, collate_cpu)
        if n == 0:
            return wall + pin + step, "serial"
        if receive is None:
            receive = self.receive_s if (self.receive_s is not None and n > 0 and self.n > 0) \
                else self.default_receive_s(B)
        main = step + receive
        # Cores left for the workers after the training thread's own CPU use.
        guess = max(main, wall / n, pin, 1e-9)
        main_cpu = self.main_cpu_s * (B / self.B) if self.n > 0 else self.step_cpu_s * (B / self.B)
        # Other processes' load takes cores, but the scheduler shares them
        # fairly by runnable thread: our n workers and the training thread get
        # at least their share.
        ours = fair_share_cores(self.cores, self.other_cores, n + 1)
        usable = max(1.0, ours - min(1.0, main_cpu / guess))
        terms = {"main_thread": main, "workers": wall / n, "worker_cpu": cpu / usable, "pin_memory": pin}
        bound = max(terms, key=lambda k: terms[k])
        return terms[bound], bound

    def rate(self, **kw: Any) -> Optional[float]:
        B = kw.get("B") or self.B
        p, _ = self.period(**kw)
        return B / p if p > 0 else None

    def capacity_rates(self) -> tuple[Optional[float], Optional[float]]:
        """The model's rate of the loader alone (no step) and of the loop."""
        return self.rate(step=0.0), self.rate()

    def best_workers(self, **kw: Any) -> int:
        """The fewest workers whose loader capacity reaches 1.3x what the step
        consumes (headroom for jitter), or 95% of the best capacity reachable
        when that is less; at most WAIT_WORKERS_PER_CORE per core (CPU-bound
        work stops gaining at the core count by itself: the worker_cpu term)."""
        cap = max(WAIT_WORKERS_PER_CORE * self.cores, self.n)
        loader: dict[int, Any] = {k: self.rate(n=k, step=0.0, **kw) for k in range(1, cap + 1)}
        B = kw.get("B") or self.B
        step = self.step_s * (B / self.B)
        demand = B / step if step > 0 else float("inf")
        target = min(0.95 * max(loader.values()), 1.3 * demand)
        return min(k for k, r in loader.items() if r >= target)



def _worker_bound(ev: Ev, m: TorchModel) -> bool:
    """The worker pool (or, with num_workers=0, the loading itself) bounds the loop."""
    if not _loader_bound(ev):
        return False
    if m.n == 0:
        return True
    _, bound = m.period()
    return bound in ("workers", "worker_cpu")


@rule("torch")
def _num_workers_zero(ev: Ev, m: TorchModel) -> Optional[Finding]:
    if m.n != 0 or not _loader_bound(ev):
        return None
    k = m.best_workers()
    pred = m.rate(n=k)
    wall, _ = m.worker_batch()
    s = ev["loader"]["settings"]
    return _finding(
        "num_workers_zero", "num_workers=0: loading runs in the training process",
        f"Every batch is loaded in the training loop's own thread ({_ms(wall)} per batch) and the step waits for it: "
        f"{_pct(_starvation(ev))} of wall time goes to waiting for data ({starvation_window(ev)}).",
        f"DataLoader(..., num_workers={k}, persistent_workers=True)"
        + (", pin_memory=True" if ev["machine"].get("cuda") and not s.get("pin_memory") else ""),
        {"load_per_batch_s": wall, "step_s": m.step_s, "starvation": _starvation(ev), "recommended_workers": k},
        pred, current_rate(ev), remedy="parallelism")


@rule("torch")
def _too_few_workers(ev: Ev, m: TorchModel) -> Optional[Finding]:
    if m.n == 0 or not _worker_bound(ev, m):
        return None
    k = m.best_workers()
    if k <= m.n:
        return None
    pred: Any = m.rate(n=k)
    now: Any = m.rate()
    if not pred or pred < SIGNIFICANT * now:
        return None
    wall, cpu = m.worker_batch()
    t = ev["torch"]
    waits = 1 - cpu / wall if wall > 0 else 0
    why = (f"the work mostly waits ({_pct(waits)} of worker time blocked), so more processes than cores help"
           if waits > 0.5 else f"{ev['machine']['cores']} cores are available")
    return _finding(
        "too_few_workers", f"Too few workers: {m.n} of the {k} this loop can use",
        f"The {m.n} worker(s) are busy {_pct(t['workers'].get('utilisation') or 0)} of the time and deliver a "
        f"batch every {_ms(wall / m.n)} while the step needs one every {_ms(m.step_s)}; {why}.",
        f"DataLoader(..., num_workers={k})",
        {"num_workers": m.n, "recommended_workers": k, "worker_batch_s": wall, "worker_cpu_share": 1 - waits,
         "step_s": m.step_s, "utilisation": t["workers"].get("utilisation")},
        pred, current_rate(ev), remedy="parallelism")


@rule("torch")
def _persistent_workers(ev: Ev, m: TorchModel) -> Optional[Finding]:
    s = ev["loader"]["settings"]
    if m.n == 0 or s.get("persistent_workers"):
        return None
    epochs = [e for e in ev["loop"].get("epoch_list", []) if e.get("first_batch_s") is not None and e["steps"] > 0]
    if len(epochs) < 2:  # the gain is for the epochs after the first: a one-epoch run has none
        return None
    latency, _ = m.worker_batch()  # the first batch, made by one worker, without start-up
    over = [max(0.0, e["first_batch_s"] - latency) for e in epochs]
    overhead = sum(over) / len(over)
    wall = sum(e["wall_s"] for e in epochs) / len(epochs)
    samples = sum(e["samples"] for e in epochs) / len(epochs)
    if wall <= 0 or overhead < STARTUP_SHARE * wall or overhead < 0.02:
        return None
    now, pred = samples / wall, samples / (wall - overhead)
    init = ev["torch"].get("startup", {}).get("worker_init_s")
    return _finding(
        "persistent_workers", "Workers restart every epoch",
        f"Each epoch starts {m.n} worker processes again: the first batch arrives after {_ms(overhead + latency)}, "
        f"{_ms(overhead)} of it start-up ({_pct(overhead / wall)} of a {wall:.2f} s epoch"
        + (f"; worker_init_fn takes {_ms(init)}" if init and init >= 1e-3 else "")
        + "); with persistent workers only the first epoch pays it.",
        "DataLoader(..., persistent_workers=True)",
        {"startup_s": overhead, "epoch_s": wall, "first_batch_s": [e["first_batch_s"] for e in epochs],
         "worker_init_s": init},
        pred, now, remedy="removes_work")


@rule("torch")
def _pin_memory_off(ev: Ev, m: TorchModel) -> Optional[Finding]:
    s, machine = ev["loader"]["settings"], ev["machine"]
    if not machine.get("cuda") or s.get("pin_memory") or not (ev["loop"].get("device") or {}).get("timed", False) \
            and not ev["torch"].get("h2d"):
        return None
    h2d = ev["torch"].get("h2d") or {}
    pred = None
    if h2d.get("pageable_s") is not None and h2d.get("pinned_s") is not None:
        saved = max(0.0, h2d["pageable_s"] - h2d["pinned_s"])
        pred = m.rate(step=max(0.0, m.step_s - saved), pin=h2d.get("pin_s", 0.0))
    return _finding(
        "pin_memory_off", "pin_memory is off while batches go to the GPU",
        "Copies from pageable memory go through a staging buffer and cannot overlap the step"
        + (f": one batch takes {_ms(h2d['pageable_s'])} to copy, {_ms(h2d['pinned_s'])} when pinned."
           if h2d.get("pageable_s") is not None else "."),
        "DataLoader(..., pin_memory=True) and batch.to('cuda', non_blocking=True)",
        dict(h2d), pred, current_rate(ev), severity=None if pred else "medium")


@rule("torch")
def _decode_bound(ev: Ev, m: TorchModel) -> Optional[Finding]:
    if not _worker_bound(ev, m):
        return None
    t = ev["torch"]
    img = t.get("image") or {}
    decoded, out_hw = img.get("decoded_pixels"), img.get("output_hw")
    load = t["load"]
    wall, _ = m.worker_batch()
    share = m.B * load["cpu_s"] / wall if wall > 0 else 0
    if not decoded or not out_hw or share < 0.35:
        return None
    aspect = img.get("decoded_aspect") or 1.0  # long / short side
    short = math.ceil(STORE_MARGIN * min(out_hw))
    target = short * short * aspect
    if decoded < 2 * target:
        return None
    ratio = target / decoded
    # Decoding costs a fixed part plus a part proportional to pixels; so does
    # every transform that works on the decoded image.
    fixed = min(load["cpu_s"], DECODE_FIXED_S)
    cut_cpu = (load["cpu_s"] - fixed) * (1 - ratio)
    cut = cut_cpu
    for tf in t.get("transforms", []):
        if tf.get("input_pixels") and tf["input_pixels"] >= 0.9 * decoded:
            tf_s = tf["wall_s"] - tf.get("runq_s", 0.0)
            cut += tf_s * (1 - ratio)
            cut_cpu += tf["cpu_s"] * (1 - ratio)
    pred = m.rate(sample_cut=cut, sample_cut_cpu=cut_cpu)
    side = int(round(math.sqrt(decoded / aspect)))
    return _finding(
        "decode_bound", "Decode-bound: images are much larger than the model's input",
        f"Decoding takes {_ms(load['cpu_s'])} of CPU per image ({_pct(share)} of worker time): images are decoded at "
        f"about {side}px on the short side ({decoded / 1e6:.1f} Mpx) for {out_hw[0]}x{out_hw[1]} outputs.",
        f"Store the images at {short}px on the short side (resize once, offline), or decode at reduced scale: "
        f"feedline.Loader decodes only the crop at the smallest JPEG DCT scale that keeps full quality "
        f"(with PIL: img.draft('RGB', size) before convert).",
        {"decode_cpu_s": load["cpu_s"], "share": share, "decoded_pixels": decoded, "output_hw": out_hw,
         "suggested_short_side": short},
        pred, current_rate(ev))


@rule("torch")
def _transform_bound(ev: Ev, m: TorchModel) -> Optional[Finding]:
    if not _worker_bound(ev, m):
        return None
    tfs = ev["torch"].get("transforms") or []
    if not tfs:
        return None
    wall, _ = m.worker_batch()
    top = max(tfs, key=lambda tf: tf["wall_s"] - tf.get("runq_s", 0.0))
    cost = top["wall_s"] - top.get("runq_s", 0.0)
    share = m.B * cost / wall if wall > 0 else 0
    if share < 0.25:
        return None
    pred = m.rate(sample_cut=cost, sample_cut_cpu=top["cpu_s"])
    return _finding(
        "transform_bound", f"Transform-bound: {top['name']}",
        f"{top['name']} (transform {top['index']} of the Compose) takes {_ms(cost)} per sample, "
        f"{_pct(share)} of worker time.",
        f"Make {top['name']} cheaper: apply it to the whole batch on the GPU after the copy, or use feedline's fused "
        "C++ transforms (crop, resize, flip and normalise in one pass).",
        {"transform": top["name"], "index": top["index"], "per_sample_s": cost, "cpu_s": top["cpu_s"], "share": share},
        pred, current_rate(ev))


@rule("torch")
def _storage_bound(ev: Ev, m: TorchModel) -> Optional[Finding]:
    if not _worker_bound(ev, m):
        return None
    t = ev["torch"]
    load = t["load"]
    wall, _ = m.worker_batch()
    share = m.B * load["blocked_s"] / wall if wall > 0 else 0
    if share < 0.25:
        return None
    files = t.get("files") or {}
    pred = m.rate(sample_cut=load["blocked_s"])
    k = m.best_workers()
    more = f" Until then, num_workers={k} hides part of the latency." if k > m.n else ""
    desc = (f" over {files['count']} files of {files['mean_bytes'] / 1024:.0f} KiB on average"
            if files.get("count") else "")
    return _finding(
        "storage_bound", "Storage-bound: workers wait for reads",
        f"Loading a sample blocks for {_ms(load['blocked_s'])} without using the CPU ({_pct(share)} of worker time)"
        f"{desc}: slow storage or many small files.",
        "Pack the dataset into shards: `feedline pack SRC OUT`, then read OUT with feedline.Loader (one read per "
        "record, read-ahead bounded in bytes), or copy it to local disk." + more,
        {"blocked_per_sample_s": load["blocked_s"], "share": share, **files},
        pred, current_rate(ev))


@rule("torch")
def _collate_bound(ev: Ev, m: TorchModel) -> Optional[Finding]:
    if not _worker_bound(ev, m):
        return None
    bt = ev["torch"]["batch"]
    wall, _ = m.worker_batch()
    share = m.collate_s / wall if wall > 0 else 0
    if share < 0.25:
        return None
    ref = bt.get("collate_reference_s")
    target = ref if ref is not None else 0.0
    pred = m.rate(collate=target, collate_cpu=min(target, m.collate_cpu_s))
    name = ev["loader"]["settings"].get("collate_fn") or "collate_fn"
    return _finding(
        "collate_bound", f"Collate-bound: {name}",
        f"{name} takes {_ms(m.collate_s)} per batch ({_pct(share)} of worker time)"
        + (f"; torch's default_collate takes {_ms(ref)} on the same samples." if ref is not None else "."),
        f"Make {name} cheaper (stack tensors once, no per-element Python work) or use the default collate and move "
        "the extra work into the dataset or onto the GPU.",
        {"collate_s": m.collate_s, "share": share, "collate_reference_s": ref},
        pred, current_rate(ev))


@rule("torch")
def _batch_too_small(ev: Ev, m: TorchModel) -> Optional[Finding]:
    """Per-batch costs (receiving in the training process, IPC and other
    fixed work in the workers) do not shrink with the batch; a larger batch
    spreads them over more samples. The step and collate are assumed to grow
    in proportion to the batch, so only those fixed costs make the gain."""
    if m.n == 0 or not _loader_bound(ev) or m.B >= LARGE_BATCH:
        return None
    rates: dict[float, Any] = {}
    for mult in (2, 4, 8, 16, 32, 64):
        if m.B * mult > 4 * LARGE_BATCH:
            break
        rates[m.B * mult] = m.rate(B=m.B * mult)
    now: Any = m.rate()
    best = max(rates.values(), default=0)
    if not now or best < SIGNIFICANT * now:
        return None
    B2 = int(min(b for b, r in rates.items() if r >= 0.95 * best))
    pred = rates[B2]
    r = m.receive_s if m.receive_s is not None else m.default_receive_s()
    return _finding(
        "batch_too_small", f"Batch too small: batch_size={m.B:g}",
        f"Each batch has fixed costs that do not shrink with it: {_ms(m.overhead_cpu_s)} of worker CPU beyond its "
        f"samples (pickling, sharing tensors) and {_ms(r)} to receive it, against {_ms(m.B * m.sample_s)} for its "
        f"{m.B:g} sample(s).",
        f"DataLoader(..., batch_size={B2:g}) (scale the learning rate with it), or accumulate gradients over "
        "several small batches loaded as one.",
        {"batch_size": m.B, "recommended_batch_size": B2, "per_batch_cpu_s": m.overhead_cpu_s,
         "per_batch_wall_s": m.overhead_s, "receive_per_batch_s": r, "per_sample_s": m.sample_s,
         "assumes": "step and collate time grow in proportion to the batch"},
        pred, current_rate(ev))


@rule("torch")
def _memory_pressure(ev: Ev, m: TorchModel) -> Optional[Finding]:
    t, machine = ev["torch"], ev["machine"]
    mem = t.get("memory") or {}
    total, avail = machine.get("mem_total_bytes") or 0, machine.get("mem_available_bytes")
    used = (mem.get("workers_pss") or 0) + (mem.get("main_pss") or mem.get("main_rss") or 0)
    growth = mem.get("max_private_growth") or 0
    low = avail is not None and total and avail < 0.10 * total
    heavy = total and used > 0.5 * total
    if not (low or heavy or growth >= COPY_ON_READ_BYTES):
        return None
    # Growth alone is a risk that scales with the dataset, not pressure yet.
    sev = "high" if low or heavy else "medium" if growth >= 4 * COPY_ON_READ_BYTES else "low"
    fix = []
    if growth >= COPY_ON_READ_BYTES:
        fix.append("keep per-sample metadata in numpy arrays or one bytes buffer rather than lists and dicts of "
                   "Python objects (reference counting writes to every object a forked worker touches, copying its "
                   "pages: copy-on-read)")
    if low or heavy:
        fix.append(f"use fewer workers (each holds {_gib((mem.get('workers_pss') or 0) / max(1, m.n))} on average)")
    fix.append("or load with threads: feedline.Loader shares one copy of everything")
    return _finding(
        "memory_pressure",
        "Memory pressure in the workers" if low or heavy else "Copy-on-read memory growth in the workers",
        f"Workers and the training process hold {_gib(used)} (PSS) of {_gib(total)}"
        + (f"; a worker's private memory grew by {_gib(growth)} while loading (copy-on-read)"
           if growth >= COPY_ON_READ_BYTES else "")
        + (f"; only {_gib(avail)} is still available" if low else "") + ".",
        "; ".join(fix) + ".",
        {"pss_bytes": used, "mem_total_bytes": total, "mem_available_bytes": avail, "max_private_growth_bytes": growth},
        current_rate(ev), current_rate(ev), remedy="risk", severity=sev)


def _gib(b: float) -> str:
    return f"{b / (1 << 30):.2f} GiB" if b >= (1 << 30) else f"{b / (1 << 20):.0f} MiB"


