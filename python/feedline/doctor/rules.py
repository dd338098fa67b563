"""Every diagnosis rule of the doctor, and the model behind its predictions.

This is the only module that decides anything. It reads the evidence dict
that the measuring side gathered (the JSON report minus its findings, see
docs/doctor.md) and returns ranked findings; the Python API, the CLI and a
saved JSON report all go through the same functions, so a report can be
re-diagnosed offline. Nothing here measures, imports torch or touches a
loader.

The model (docs/doctor.md, "The model behind every prediction"): a training
loop is a pipeline of stages that overlap; its period per batch is the
slowest stage's time per batch. For a torch DataLoader with n workers:

    period = max(step + receive,            # the training thread
                 W / n,                      # the worker pool, wall time
                 W_cpu / C_usable,           # the worker pool, CPU time
                 pin)                        # the pin-memory thread
    W      = B * sample + collate + per-batch IPC in the worker

where "sample" is the wall time of __getitem__ without run-queue waits
(time spent waiting for a core is a symptom of too many processes, not a
cost of the sample), W_cpu the CPU part of W, and C_usable the cores left
by other processes (at least our fair share by thread) and by the training
process. With num_workers=0 everything runs in the training thread, one
after the other: period = W + pin + step. A fix changes one input of the
model (n, B, one stage's cost), and its predicted throughput is
B' / period'.
"""
import math

STARVED = 0.10          # share of wall time waiting for data above which input bounds the loop
SIGNIFICANT = 1.10      # a fix predicted to gain less is listed as low severity
PREFER_CAUSE = 0.90     # a fix that removes work ranks above one that adds processes
                        # when it predicts at least this share of the other's throughput
WAIT_WORKERS_PER_CORE = 2   # process cap for work that mostly waits (I/O, sleeps)
DEFAULT_RECEIVE_S = 1e-3    # per-batch IPC cost assumed when no worker ever ran
RECEIVE_BYTES_PER_S = 4e9   # ... plus the batch's bytes at this rate
COLLATE_BYTES_PER_S = 1e9   # collate's part that grows with the batch: copying its bytes
DECODE_FIXED_S = 1.5e-4     # per-image cost of opening a file and a decoder, any size
STORE_MARGIN = 1.15         # stored short side / output short side (256 for 224)
STEP_BOUND_RANK = 1.5       # "input is fine" ranks like a fix of this speedup
STARTUP_SHARE = 0.10        # start-up above this share of an epoch is worth persistent workers
                            # (from two observed epochs: the first epoch pays the start-up anyway)
FL_IDLE = 0.5               # feedline threads idle above this share of their time do not bound the loop
COPY_ON_READ_BYTES = 64 << 20
LARGE_BATCH = 64


def diagnose(ev):
    """Ranked findings for a watched loop (mode "loop")."""
    kind = (ev.get("loader") or {}).get("kind")
    findings = []
    if kind == "torch" and ev.get("torch"):
        m = TorchModel(ev)
        for rule in (_num_workers_zero, _too_few_workers, _persistent_workers, _pin_memory_off,
                     _decode_bound, _transform_bound, _storage_bound, _collate_bound,
                     _batch_too_small, _memory_pressure):
            f = rule(ev, m)
            if f:
                findings.append(f)
    elif kind == "feedline" and ev.get("feedline"):
        m = FeedlineModel(ev)
        for rule in (_fl_too_few_threads, _fl_storage_bound, _fl_decode_bound):
            f = rule(ev, m)
            if f:
                findings.append(f)
    f = _step_bound(ev)
    if f:
        findings.append(f)
    if not findings:
        findings.append(_unexplained(ev))
    f = _probes_not_attached(ev)
    if f:  # first among equals (it explains why no stage is named)
        findings.insert(0, f)
    return rank(findings)


def rank(findings):
    """Orders findings: imminent memory exhaustion first, then by predicted
    speedup, a fix that removes work before one that adds processes when both
    predict about the same. "Input is fine" (step_bound) ranks as a 1.5x
    gain: above any small input-side fix, below a big one that the steady
    state does not show (worker start-up every epoch)."""
    def key(f):
        top = f["id"] == "memory_pressure" and f["severity"] == "high"
        speed = f.get("predicted_speedup") or 1.0
        if f["id"] == "step_bound":
            speed = STEP_BOUND_RANK
        if f.get("remedy") == "parallelism":
            speed *= PREFER_CAUSE
        return (0 if top else 1, -speed)
    out = sorted(findings, key=key)
    for i, f in enumerate(out):
        f["rank"] = i + 1
    return out


def _finding(fid, title, summary, fix, evidence, predicted, current, remedy="removes_work", severity=None):
    speedup = predicted / current if predicted and current else None
    if severity is None:
        severity = "high" if speedup and speedup >= 1.5 else "medium" if speedup and speedup >= SIGNIFICANT else "low"
    return {"id": fid, "title": title, "severity": severity, "summary": summary, "fix": fix,
            "evidence": evidence, "remedy": remedy,
            "predicted_samples_per_s": round(predicted, 3) if predicted else None,
            "predicted_speedup": round(speedup, 3) if speedup else None}


def _ms(s):
    return f"{s * 1e3:.1f} ms" if s >= 1e-3 or s == 0 else f"{s * 1e6:.0f} us"


def _pct(x):
    return f"{100 * x:.0f}%"


def _starvation(ev):
    """The share of time the loop waits for data, in steady state (epoch
    start-ups are the persistent_workers rule's business); on the device's
    clock when CUDA events timed it."""
    loop = ev.get("loop") or {}
    dev = loop.get("device")
    if dev and dev.get("starvation") is not None:
        return dev["starvation"]
    if loop.get("steady_starvation") is not None:
        return loop["steady_starvation"]
    return loop.get("starvation") or 0.0


def current_rate(ev):
    """The measured rate predictions are compared with: steady state
    (epoch start-ups excluded) when known."""
    loop = ev.get("loop") or {}
    return loop.get("steady_samples_per_s") or loop.get("samples_per_s") or 0.0


# -- the torch DataLoader model --------------------------------------------------
class TorchModel:
    """The period model of a torch DataLoader loop (module docstring)."""

    def __init__(self, ev):
        t, loop, machine = ev["torch"], ev["loop"], ev["machine"]
        s = ev["loader"]["settings"]
        self.n = int(s.get("num_workers") or 0)
        self.cores = max(1, int(machine.get("cores") or 1))
        # Cores other processes kept busy meanwhile (see period()).
        self.other_cores = min(self.cores - 1.0, machine.get("other_cpu_cores") or 0.0)
        # Samples per batch, as the loop counts them: batch_size, unless each
        # dataset call makes many samples (batch_size=None, or items that are
        # already batches), then the batches' own size.
        spb, bs = t.get("samples_per_batch") or 1, ev["loader"].get("batch_size")
        self.B = bs if bs and spb <= 1.5 * bs else max(1, round(spb))
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
        self.receive_s = bt.get("receive_s")
        self.receive_cpu_s = loop.get("receive_cpu_mean_s") or 0.0
        self.batch_bytes = bt.get("bytes") or 0
        if self.n == 0 or self.receive_s is None:
            self.receive_s = None

    def collate_at(self, B, seconds):
        """Collate time at batch size B. torch's default collate: a fixed
        part plus copying the batch's bytes (at COLLATE_BYTES_PER_S), which
        grows with B; a custom collate_fn: in proportion to B (its fixed part
        is unknown, so no batch size is credited with amortising it)."""
        if not self.default_collate:
            return seconds * (B / self.B)
        copy = min(seconds, self.batch_bytes / COLLATE_BYTES_PER_S)
        return seconds - copy + copy * (B / self.B)

    def default_receive_s(self, B=None):
        b = self.batch_bytes * ((B or self.B) / self.B)
        return DEFAULT_RECEIVE_S + b / RECEIVE_BYTES_PER_S

    def worker_batch(self, B=None, sample_cut=0.0, sample_cut_cpu=0.0, collate=None, collate_cpu=None):
        """(wall, cpu) of one batch in one worker."""
        B = B or self.B
        c = self.collate_at(B, self.collate_s) if collate is None else collate
        c_cpu = self.collate_at(B, self.collate_cpu_s) if collate_cpu is None else collate_cpu
        wall = B * max(0.0, self.sample_s - sample_cut) + c + self.overhead_s
        cpu = B * max(0.0, self.sample_cpu_s - sample_cut_cpu) + c_cpu + self.overhead_cpu_s
        return wall, cpu

    def period(self, n=None, B=None, sample_cut=0.0, sample_cut_cpu=0.0, collate=None, collate_cpu=None,
               step=None, receive=None, pin=None):
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
        ours = max(self.cores - self.other_cores, self.cores * (n + 1) / (n + 1 + self.other_cores))
        usable = max(1.0, ours - min(1.0, main_cpu / guess))
        terms = {"main_thread": main, "workers": wall / n, "worker_cpu": cpu / usable, "pin_memory": pin}
        bound = max(terms, key=terms.get)
        return terms[bound], bound

    def rate(self, **kw):
        B = kw.get("B") or self.B
        p, _ = self.period(**kw)
        return B / p if p > 0 else None

    def best_workers(self, **kw):
        """The fewest workers whose loader capacity reaches 1.3x what the step
        consumes (headroom for jitter), or 95% of the best capacity reachable
        when that is less; at most WAIT_WORKERS_PER_CORE per core (CPU-bound
        work stops gaining at the core count by itself: the worker_cpu term)."""
        cap = max(WAIT_WORKERS_PER_CORE * self.cores, self.n)
        loader = {k: self.rate(n=k, step=0.0, **kw) for k in range(1, cap + 1)}
        B = kw.get("B") or self.B
        step = self.step_s * (B / self.B)
        demand = B / step if step > 0 else float("inf")
        target = min(0.95 * max(loader.values()), 1.3 * demand)
        return min(k for k, r in loader.items() if r >= target)


def _loader_bound(ev):
    return _starvation(ev) >= STARVED


def _worker_bound(ev, m):
    """The worker pool (or, with num_workers=0, the loading itself) bounds the loop."""
    if not _loader_bound(ev):
        return False
    if m.n == 0:
        return True
    _, bound = m.period()
    return bound in ("workers", "worker_cpu")


def _num_workers_zero(ev, m):
    if m.n != 0 or not _loader_bound(ev):
        return None
    k = m.best_workers()
    pred = m.rate(n=k)
    wall, _ = m.worker_batch()
    s = ev["loader"]["settings"]
    return _finding(
        "num_workers_zero", "num_workers=0: loading runs in the training process",
        f"Every batch is loaded in the training loop's own thread ({_ms(wall)} per batch) and the step waits for it: "
        f"{_pct(_starvation(ev))} of wall time goes to waiting for data.",
        f"DataLoader(..., num_workers={k}, persistent_workers=True)"
        + (", pin_memory=True" if ev["machine"].get("cuda") and not s.get("pin_memory") else ""),
        {"load_per_batch_s": wall, "step_s": m.step_s, "starvation": _starvation(ev), "recommended_workers": k},
        pred, current_rate(ev), remedy="parallelism")


def _too_few_workers(ev, m):
    if m.n == 0 or not _worker_bound(ev, m):
        return None
    k = m.best_workers()
    if k <= m.n:
        return None
    pred, now = m.rate(n=k), m.rate()
    if not pred or pred < SIGNIFICANT * now:
        return None
    wall, cpu = m.worker_batch()
    t = ev["torch"]
    waits = 1 - cpu / wall if wall > 0 else 0
    why = (f"the work mostly waits ({_pct(waits)} of worker time blocked), so more processes than cores help"
           if waits > 0.5 else f"{ev['machine']['cores']} cores are available")
    return _finding(
        "too_few_workers", f"Too few workers: {m.n} of the {k} this loop can use",
        f"The {m.n} worker(s) are busy {_pct(t['workers'].get('utilisation') or 0)} of the time and deliver a batch every "
        f"{_ms(wall / m.n)} while the step needs one every {_ms(m.step_s)}; {why}.",
        f"DataLoader(..., num_workers={k})",
        {"num_workers": m.n, "recommended_workers": k, "worker_batch_s": wall, "worker_cpu_share": 1 - waits,
         "step_s": m.step_s, "utilisation": t["workers"].get("utilisation")},
        pred, current_rate(ev), remedy="parallelism")


def _persistent_workers(ev, m):
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


def _pin_memory_off(ev, m):
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


def _decode_bound(ev, m):
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


def _transform_bound(ev, m):
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


def _storage_bound(ev, m):
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


def _collate_bound(ev, m):
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


def _batch_too_small(ev, m):
    """Per-batch costs (receiving in the training process, IPC and other
    fixed work in the workers) do not shrink with the batch; a larger batch
    spreads them over more samples. The step and collate are assumed to grow
    in proportion to the batch, so only those fixed costs make the gain."""
    if m.n == 0 or not _loader_bound(ev) or m.B >= LARGE_BATCH:
        return None
    rates = {}
    for mult in (2, 4, 8, 16, 32, 64):
        if m.B * mult > 4 * LARGE_BATCH:
            break
        rates[m.B * mult] = m.rate(B=m.B * mult)
    now = m.rate()
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


def _memory_pressure(ev, m):
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
        "memory_pressure", "Memory pressure in the workers" if low or heavy else "Copy-on-read memory growth in the workers",
        f"Workers and the training process hold {_gib(used)} (PSS) of {_gib(total)}"
        + (f"; a worker's private memory grew by {_gib(growth)} while loading (copy-on-read)"
           if growth >= COPY_ON_READ_BYTES else "")
        + (f"; only {_gib(avail)} is still available" if low else "") + ".",
        "; ".join(fix) + ".",
        {"pss_bytes": used, "mem_total_bytes": total, "mem_available_bytes": avail, "max_private_growth_bytes": growth},
        current_rate(ev), current_rate(ev), remedy="risk", severity=sev)


def _gib(b):
    return f"{b / (1 << 30):.2f} GiB" if b >= (1 << 30) else f"{b / (1 << 20):.0f} MiB"


def _receive_bound(ev):
    """(torch) The waiting is the training process receiving batches that
    idle workers already made: the receive time per batch, else None."""
    if (ev.get("loader") or {}).get("kind") != "torch" or not ev.get("torch"):
        return None
    m = TorchModel(ev)
    r = m.receive_s
    if m.n == 0 or r is None or m.period()[1] != "main_thread" or m.step_s < 2 * r:
        return None
    return r


def _input_is_fine(ev):
    return _starvation(ev) < STARVED or _receive_bound(ev) is not None


def _step_bound(ev):
    """The step bounds the loop: little waiting, or (torch) the waiting is
    the training process receiving batches the idle workers already made."""
    starv = _starvation(ev)
    loop = ev.get("loop") or {}
    if not loop.get("steps"):
        return None
    receiving = ""
    if starv >= STARVED:
        r = _receive_bound(ev)
        if r is None:
            return None
        receiving = (f" The wait is the training process receiving each batch ({_ms(r)}: unpickling it and "
                     f"mapping its shared memory) while the workers idle; larger batches or feedline.Loader "
                     f"(threads, no IPC) would shrink it.")
    cap = ev.get("capacity") or {}
    lc = (cap.get("loader_samples_per_s") or {}).get("value")
    head = f"; the loader can deliver about {lc:.0f} samples/s, {lc / current_rate(ev):.1f}x what the step uses" \
        if lc and current_rate(ev) else ""
    return _finding(
        "step_bound", "Input is fine: the step is the bottleneck",
        f"The loop waits for data {_pct(starv)} of the time; the step takes {_ms(loop.get('step_mean_s') or 0)}"
        f"{head}.{receiving}",
        "Speed up the step itself (mixed precision, a larger batch per step, torch.compile); changing the loader "
        "will not help.",
        {"starvation": starv, "step_s": loop.get("step_mean_s"), "loader_samples_per_s": lc},
        current_rate(ev), current_rate(ev), remedy="none", severity="info")


def _unexplained(ev):
    starv = _starvation(ev)
    if not (ev.get("loop") or {}).get("steps"):
        return _finding("nothing_measured", "Nothing measured yet",
                        "No step was watched: iterate doctor.watch(loader) in the training loop first.",
                        "for batch in doctor.watch(loader): step(batch)", {}, None, None, remedy="none",
                        severity="info")
    return _finding(
        "unexplained", "Starved, cause not found",
        f"The loop waits for data {_pct(starv)} of the time, but no per-stage evidence explains it "
        "(an unknown iterable, or a stage the doctor cannot see).",
        "Run doctor.measure_capacity(loader) to measure the loader alone, or use a torch DataLoader or "
        "feedline.Loader, which the doctor can look inside.",
        {"starvation": starv}, None, current_rate(ev), remedy="none", severity="info")


def _probes_not_attached(ev):
    """Says what the doctor could not attach to a torch DataLoader, and why
    (the "probes" section, from _torch_compat): everything (the loop timed
    from outside: wait per batch and step time only), or one optional part."""
    p = ev.get("probes")
    if not p or not p.get("not_attached"):
        return None
    parts = p["not_attached"]
    why = "; ".join(n["reason"] if n["reason"].startswith(n["part"]) else f"{n['part']}: {n['reason']}"
                    for n in parts)
    ver = p.get("torch_version") or "?"
    if p.get("mode") == "outside":
        return _finding(
            "probes_not_attached", "Timed from outside only: the doctor could not attach its probes",
            f"On torch {ver} the doctor left this DataLoader as it was ({why}). The wait for each batch and "
            "the step time are measured; the per-stage split (load, transforms, collate, workers) is not, so "
            "no finding below can name a stage.",
            "Nothing to change in the loop, which got its batches untouched. For the per-stage view, watch the "
            "loader before its persistent workers first start, or report this message with the torch version.",
            {"torch_version": ver, "not_attached": parts}, None, None, remedy="none", severity="info")
    return _finding(
        "probes_not_attached", "Some of the doctor's probes could not attach",
        f"On torch {ver}: {why}. Those parts' times are missing (counted in the sample's time where they ran "
        "inside it); everything else was measured.",
        "Nothing to change in the loop, which got its batches untouched.",
        {"torch_version": ver, "not_attached": parts}, None, None, remedy="none", severity="info")


# -- the feedline Loader model -----------------------------------------------------
class FeedlineModel:
    """feedline's threads claim one sample at a time and write it straight
    into its batch, so the loader's period per sample is the per-sample op
    time divided by the threads actually running (at most the usable cores
    for the CPU part; reads may overlap beyond them)."""

    def __init__(self, ev):
        f, loop = ev["feedline"], ev["loop"]
        self.threads = max(1, int(f.get("num_threads") or 1))
        self.cores = max(1, int(ev["machine"].get("cores") or 1))
        self.ops = {o["name"]: o for o in f.get("ops", [])}
        self.sample_s = sum(o["per_item_s"] for o in f.get("ops", []))
        self.read_s = self.ops.get("read", {}).get("per_item_s", 0.0)
        self.B = ev["loader"].get("batch_size") or 1
        self.step_s = loop.get("step_mean_s") or 0.0
        # The training thread's share of a core: its CPU per step over the
        # loop's period (the slower of the step and the loader).
        loader_period = self.B * self.sample_s / self.threads
        step_share = min(1.0, (loop.get("step_cpu_mean_s") or 0.0) / max(self.step_s, loader_period, 1e-9))
        other = min(self.cores - 1.0, ev["machine"].get("other_cpu_cores") or 0.0)
        # Other processes take cores, but at most their fair share by thread.
        ours = max(self.cores - other, self.cores * (self.threads + 1) / (self.threads + 1 + other))
        self.usable = max(1.0, ours - step_share)

    def rate(self, threads=None, read_cut=0.0):
        T = threads or self.threads
        per = max(1e-12, self.sample_s - read_cut)
        cpu = max(1e-12, per - (self.read_s - read_cut))
        loader = min(T / per, self.usable / cpu)
        step = self.B / self.step_s if self.step_s > 0 else float("inf")
        return min(loader, step)


def _fl_idle_share(f):
    """The share of the threads' time spent idle: waiting for the next
    epoch's plan or for a free ring buffer. Time a thread is off the CPU
    between samples (a busy machine, handing the lock over) is not idleness:
    the thread had work and was not waiting for anything, so it lowers
    `utilisation` without saying that more threads would not help."""
    total = (f.get("num_threads") or 1) * (f.get("uptime_s") or 0.0)
    idle = (f.get("wait_input_s") or 0.0) + (f.get("blocked_output_s") or 0.0)
    return idle / total if total > 0 else 0.0


def _fl_too_few_threads(ev, m):
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


def _fl_storage_bound(ev, m):
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


def _fl_decode_bound(ev, m):
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


# -- the pipeline alone (CLI) --------------------------------------------------------
def diagnose_pipeline(ev, target_rate=None):
    """Findings for `python3 -m feedline.doctor DATA`: the pipeline measured
    alone at several thread counts (ev["scan"]). Returns (findings, summary)
    where summary holds the bottleneck, best rate, per-core rate and the
    answer for target_rate. Findings come in a fixed order: the answer for
    the target rate (the question asked), the bottleneck, poor scaling."""
    scan = [s for s in ev.get("scan", []) if s.get("samples_per_s")]
    if not scan:
        return [], {}
    cores = max(1, int(ev["machine"].get("cores") or 1))
    best = max(scan, key=lambda s: s["samples_per_s"])
    one = min(scan, key=lambda s: s["threads"])
    per_core = one["samples_per_s"] / min(one["threads"], cores)
    stages = best.get("stages") or []
    total = sum(s["per_sample_s"] for s in stages) or 1e-12
    top = max(stages, key=lambda s: s["per_sample_s"]) if stages else None
    eff = {s["threads"]: s["samples_per_s"] / (per_core * min(s["threads"], cores)) for s in scan}
    summary = {"best_threads": best["threads"], "best_samples_per_s": best["samples_per_s"],
               "per_core_samples_per_s": per_core, "bottleneck": top["name"] if top else None,
               "bottleneck_share": top["per_sample_s"] / total if top else None, "efficiency": eff}
    findings = []
    if top:
        findings.append(_finding(
            "pipeline_bottleneck", f"Bottleneck stage: {top['name']}",
            f"{top['name']} takes {_ms(top['per_sample_s'])} of the {_ms(total)} each sample costs a thread "
            f"({_pct(top['per_sample_s'] / total)}).",
            "Reads: pack into shards or raise read_ahead_bytes. Decode/transform: store smaller images, use "
            "uint8 output and normalise on the GPU, or add cores.",
            {"stage": top["name"], "per_sample_s": top["per_sample_s"], "share": top["per_sample_s"] / total},
            None, None, remedy="none", severity="info"))
    worst = min(((t, e) for t, e in eff.items() if min(t, cores) > 1), key=lambda x: x[1], default=None)
    if worst and worst[1] < 0.7:
        findings.append(_finding(
            "poor_scaling", f"Scaling stops early: {_pct(worst[1])} efficiency at {worst[0]} threads",
            f"{worst[0]} threads deliver {_pct(worst[1])} of {worst[0]}x the one-thread rate: memory bandwidth, "
            "storage or another process competes for the cores.",
            "Check that no other work runs on these cores; for remote or slow storage raise read_ahead_bytes.",
            {"threads": worst[0], "efficiency": worst[1]}, None, None, remedy="none",
            severity="medium"))
    if target_rate:
        # Extrapolate from the per-core rate at the largest core count measured,
        # which already carries the scaling losses seen so far.
        widest = max(scan, key=lambda s: (min(s["threads"], cores), s["samples_per_s"]))
        used = min(widest["threads"], cores)
        per_core_scaled = widest["samples_per_s"] / used
        need = math.ceil(target_rate / per_core_scaled)
        measured_ok = [s for s in scan if s["samples_per_s"] >= target_rate]
        if measured_ok:
            t = min(measured_ok, key=lambda s: s["threads"])
            answer = (f"Yes: {t['threads']} thread(s) measured {t['samples_per_s']:.0f} samples/s "
                      f">= {target_rate:g}.")
            cores_needed, extrapolated = min(t["threads"], cores), False
        else:
            need = max(need, used + 1)  # the cores measured did not reach it
            answer = (f"Not with the {used} core(s) measured (best {best['samples_per_s']:.0f} samples/s). "
                      f"Extrapolated from {per_core_scaled:.0f} samples/s per core measured at {widest['threads']} "
                      f"thread(s) ({_pct(eff[widest['threads']])} scaling efficiency), assuming it holds: "
                      f"about {need} cores" + (f"; this machine has {cores}." if need > cores else
                                               f"; measure with --threads up to {need} to confirm."))
            cores_needed, extrapolated = need, True
        summary.update({"target_samples_per_s": target_rate, "can_feed": bool(measured_ok),
                        "cores_needed": cores_needed, "extrapolated": extrapolated, "answer": answer,
                        "per_core_at_scale_samples_per_s": per_core_scaled})
        findings.insert(0, _finding(
            "target_rate", f"Target {target_rate:g} samples/s: " + ("can feed" if measured_ok else f"needs ~{need} cores"),
            answer, "" if measured_ok else f"Run with at least {need} cores (threads), or reduce per-sample cost.",
            {"target_samples_per_s": target_rate, "cores_needed": cores_needed, "extrapolated": extrapolated,
             "per_core_samples_per_s": per_core_scaled},
            None, None, remedy="none",
            severity="info" if measured_ok else "high"))
    return findings, summary


# -- capacity vs demand ---------------------------------------------------------------
def capacity(ev, measured=None):
    """Loader capacity and step capacity in samples/s: measured where
    measure_capacity ran, else from the model (loader) or the loop's own step
    times (step); which side bounds the loop; and the model's rate for the
    current settings with its error against the measured rate."""
    measured = measured or {}
    loop = ev.get("loop") or {}
    kind = (ev.get("loader") or {}).get("kind")
    out = {"loop_samples_per_s": current_rate(ev), "bound": None, "model_samples_per_s": None, "model_error": None}
    model_loader = None
    if kind == "torch" and ev.get("torch"):
        m = TorchModel(ev)
        model_loader = m.rate(step=0.0)
        now = m.rate()
        out["model_samples_per_s"] = now
    elif kind == "feedline" and ev.get("feedline") and (ev["feedline"].get("ops")):
        m = FeedlineModel(ev)
        if m.sample_s > 0:
            step_saved, m.step_s = m.step_s, 0.0
            model_loader = m.rate()
            m.step_s = step_saved
            out["model_samples_per_s"] = m.rate()
    if out["model_samples_per_s"] and out["loop_samples_per_s"]:
        out["model_error"] = out["model_samples_per_s"] / out["loop_samples_per_s"] - 1
    if measured.get("loader_samples_per_s"):
        out["loader_samples_per_s"] = {"value": measured["loader_samples_per_s"], "source": "measured"}
    elif model_loader:
        out["loader_samples_per_s"] = {"value": model_loader, "source": "model"}
    else:
        out["loader_samples_per_s"] = {"value": None, "source": None}
    per_step = (loop.get("samples") or 0) / loop["steps"] if loop.get("steps") else 0
    if measured.get("step_samples_per_s"):
        out["step_samples_per_s"] = {"value": measured["step_samples_per_s"], "source": "measured"}
    elif loop.get("step_mean_s"):
        out["step_samples_per_s"] = {"value": per_step / loop["step_mean_s"], "source": "loop"}
    else:
        out["step_samples_per_s"] = {"value": None, "source": None}
    if loop.get("steps"):
        out["bound"] = "step" if _input_is_fine(ev) else "loader"
    return out
