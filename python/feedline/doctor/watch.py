"""Doctor: watches a training loop's data iterable, step by step.

    doctor = feedline.doctor.Doctor()
    for epoch in range(epochs):
        for batch in doctor.watch(loader):
            step(batch)
    doctor.report()

Per step it records when the loop asked for a batch, how long it waited for
it and how long the step took (from the yield until the loop asks again),
plus the training thread's CPU time in each. On a CUDA machine, once the loop
has touched CUDA, a pair of events per step measures the device's own idle
time between steps, so that work still queued on the GPU is not counted as
starvation. The loader itself is looked into by a probe (torch_loader.py,
feedline_loader.py); any other iterable is timed from the outside only.
"""
from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Iterator, Optional, TextIO, Union

from .evidence import (
    CpuPoint,
    DeviceTiming,
    Evidence,
    HostToDevice,
    LoopSite,
    ProbeStatus,
    Ranks,
    Step,
    WhatIf,
    steady_mask,
)
from .feedline_loader import FeedlineProbe, is_feedline_loader
from .probes import Probe, ProbedBatch
from .tokens import token_field
from .torch_loader import TorchProbe, _tensors, count_samples, is_torch_loader

if TYPE_CHECKING:
    from ._report import Report, Span

_NOW = time.perf_counter


class NullProbe:
    """Any other iterable: timed from the outside only."""

    kind: ClassVar[str] = "iterable"

    def __init__(self, iterable: Iterable[Any]) -> None:
        self.loader = iterable

    def attach(self) -> None:
        pass

    def detach(self) -> None:
        pass

    def release(self) -> None:
        pass

    def unwrap(self, batch: Any, t_request: float, t_received: float, epoch: int, capacity: bool = False) -> Any:
        return batch

    def note_batch(self, batch: Any) -> None:
        pass

    def warmup_batches(self) -> int:
        return 1

    def settings(self) -> dict[str, Any]:
        return {}

    def status(self) -> Optional[ProbeStatus]:
        return None

    def add_evidence(self, ev: Evidence, doctor: Doctor) -> None:
        pass

    def spans(self, t0: float) -> list[Span]:
        return []


# The probe for a loader: the first whose test accepts it; NullProbe for anything else.
# A new loader kind adds its (test, probe class) here and its rules in rules/.
PROBE_KINDS: list[tuple[Callable[[Any], bool], Callable[[Any], Probe]]] = [
    (is_torch_loader, TorchProbe),
    (is_feedline_loader, FeedlineProbe),
]


def probe_for(iterable: Any) -> Probe:
    for accepts, make in PROBE_KINDS:
        if accepts(iterable):
            return make(iterable)
    return NullProbe(iterable)


def clone_batch(batch: Any) -> Any:
    try:
        import torch
    except ImportError:
        return batch
    if isinstance(batch, torch.Tensor):
        return batch.clone()
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(clone_batch(b) for b in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(clone_batch(b) for b in batch)
    if isinstance(batch, dict):
        return {k: clone_batch(v) for k, v in batch.items()}
    return batch


class _DeviceTimer:
    """CUDA events around each step: idle gaps between one step's last
    queued work and the next step's first, on the device's own clock. At
    most `keep` steps are timed (like Doctor.keep_steps)."""

    def __init__(self, mode: Union[str, bool], keep: int = 100_000) -> None:
        self.mode = mode
        self.keep = keep
        self.enabled = False
        self.pairs: list[tuple[Any, Any, int]] = []  # (start_event, end_event, epoch)
        self._start: Any = None

    def _check(self) -> bool:
        if self.enabled or self.mode is False:
            return self.enabled
        self.enabled = _cuda_in_use()
        return self.enabled

    def step_start(self) -> None:
        if self.enabled and len(self.pairs) < self.keep:
            import torch
            self._start = torch.cuda.Event(enable_timing=True)
            self._start.record()

    def step_end(self, epoch: int = 0) -> None:
        if self._start is not None:
            import torch
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self.pairs.append((self._start, end, epoch))
            self._start = None
        else:
            self._check()  # from the next step on, once the loop has touched CUDA

    def summary(self, skip: int = 1) -> Optional[dict[str, Any]]:
        """Busy and idle device time over the steady state: as for the host
        (report._loop_section), each epoch's warm-up (evidence.warmup_steps)
        is left out, and so is every gap that
        crosses an epoch boundary (validation, checkpointing: not the
        loader's doing). Events only need elapsed_time() and synchronize()."""
        if not self.pairs:
            return None
        self.pairs[-1][1].synchronize()
        busy = idle = 0.0
        steps = 0
        prev_end: Any = None
        prev_epoch: Optional[int] = None
        for (start, end, epoch), steady in zip(self.pairs, steady_mask([p[2] for p in self.pairs], skip)):
            if steady:
                steps += 1
                busy += start.elapsed_time(end)
                if prev_epoch == epoch:  # the wait before this step, on the device
                    idle += max(0.0, prev_end.elapsed_time(start))
            prev_end, prev_epoch = end, epoch
        busy, idle = busy / 1e3, idle / 1e3
        total = busy + idle
        return DeviceTiming(timed=True, steps=len(self.pairs), steady_steps=steps, busy_s=busy, idle_s=idle,
                            starvation=idle / total if total > 0 else 0.0).to_json()


class _EpochRun:
    """One epoch being watched. watch()'s generator drives it around each
    next(); a framework's callbacks drive it through StepHooks. request()
    when the loop asks for a batch, received() when it has it, step_done()
    when the step ends (the loop asks again), end() at the epoch's end."""

    def __init__(self, doctor: Doctor, iterable: Any) -> None:
        self.doctor = doctor
        self.probe = doctor._attach(iterable)
        self.epoch: dict[str, Any] = {"index": len(doctor.epochs), "t_iter": _NOW(), "first_batch_s": None,
                                      "steps": 0, "samples": 0, "t_end": None}
        if doctor.t0 is None or doctor.cpu_window is None:
            doctor.t0 = self.epoch["t_iter"]
            doctor.cpu_window = [_cpu_point(0), None]
        self.window = doctor.cpu_window
        self.warmup = self.probe.warmup_batches() if len(doctor.epochs) == 0 else -1
        doctor.epochs.append(self.epoch)
        doctor.collectives.install()
        # (t_request, c0, p0) once asked; then the step in progress:
        # (t_request, t_recv, samples, thread cpu x2, process cpu, tokens)
        self.asked: Optional[tuple[float, float, float]] = None
        self.pending: Optional[tuple[float, float, int, float, float, float, int]] = None
        self.profiled = False
        self.ended = False

    def request(self, at: Optional[float] = None) -> None:
        self.asked = (_NOW() if at is None else at, time.thread_time(), time.process_time())

    def received(self, raw: Any, samples: Optional[int] = None) -> Any:
        """The batch arrived: returns it unwrapped. `samples` counts it
        where the caller knows better than the batch (a framework's hook
        that does not see the batch passes raw=None)."""
        d, epoch = self.doctor, self.epoch
        t_recv = _NOW()
        c1 = time.thread_time()
        t_request, c0, p0 = self.asked if self.asked is not None else (t_recv, c1, time.process_time())
        self.asked = None
        info = raw.info if isinstance(raw, ProbedBatch) else None
        batch = self.probe.unwrap(raw, t_request, t_recv, epoch["index"]) if raw is not None else None
        del raw
        if samples is None:
            # Counted in the batch itself (a dataset call can make many samples).
            samples = (info.get("delivered") if info is not None else None) or count_samples(batch)
        tokens = d._count_tokens(batch) if batch is not None else 0
        if epoch["first_batch_s"] is None:
            epoch["first_batch_s"] = t_recv - epoch["t_iter"]
            if batch is not None:
                self.probe.note_batch(batch)
                if isinstance(batch, dict) and d.batch_keys is None:
                    d.batch_keys = [str(k) for k in batch]
                if d._cached is None and (d.step_fn is not None or d._device.enabled):
                    d._cached = clone_batch(batch)
        d._device.step_start()
        self.profiled = epoch["steps"] >= max(0, self.warmup) and d.step_profiler.begin_step(
            d.step_count + 1, d._device.enabled or _cuda_in_use(), t_recv)
        self.pending = (t_request, t_recv, int(samples or 0), c0, c1, p0, tokens)
        return batch

    def step_done(self, at: Optional[float] = None) -> None:
        if self.pending is None:
            return
        d = self.doctor
        d._finish_step(self.epoch, self.pending, keep=not self.profiled, t_done=at)
        if self.profiled:
            d.step_profiler.end_step()
        self.pending = None
        if self.epoch["steps"] == self.warmup:  # steady state from here: leave start-up CPU out
            self.window[0] = _cpu_point(d.step_count)

    def end(self, release: bool = True) -> None:
        if self.ended:
            return
        self.ended = True
        d = self.doctor
        try:
            if self.pending is not None:  # the loop left during a step (break, exception)
                d._finish_step(self.epoch, self.pending)
                self.pending = None
        finally:
            d.collectives.remove()
            d.step_profiler.finish()  # the epoch ended before the steps asked for
            self.epoch["t_end"] = _NOW()
            self.window[1] = _cpu_point(d.step_count)
            if release:
                self.probe.release()  # restores the loader unless that would stop its persistent workers


class StepHooks:
    """Doctor.hooks(): a framework callback's side of watching. Call
    epoch_start() when the epoch begins (the loop is about to ask for its
    first batch), batch_start(batch) when the step has its batch,
    batch_end() when the step is done (the loop asks for the next one) and
    epoch_end() at the epoch's end (or when training stops mid-epoch)."""

    def __init__(self, doctor: Doctor, iterable: Any) -> None:
        self.doctor, self.iterable = doctor, iterable
        self._run: Optional[_EpochRun] = None

    def epoch_start(self) -> None:
        if self._run is not None:
            self._run.end()
        self._run = _EpochRun(self.doctor, self.iterable)
        self._run.request()

    def batch_start(self, batch: Any = None, samples: Optional[int] = None) -> None:
        if self._run is None:  # a framework that starts mid-epoch (a resumed run) without an epoch hook
            self.epoch_start()
        assert self._run is not None
        self._run.received(batch, samples)

    def batch_end(self, at: Optional[float] = None) -> None:
        """The step ended (at `at`, a time.perf_counter() reading, when the
        hook runs later than that): the loop asks for the next batch."""
        if self._run is not None:
            self._run.step_done(at)
            self._run.request(at)

    def epoch_end(self) -> None:
        if self._run is not None:
            self._run.end()
            self._run = None


class Watched:
    """What Doctor.watch returns: iterate it once per epoch. report() (the
    module-level `w = watch(loader); ...; w.report()` pattern) diagnoses and
    then restores the loader; close() (or `with`) restores it without a
    report. Both are idempotent, and iterating again re-attaches."""

    def __init__(self, doctor: Doctor, iterable: Any) -> None:
        self.doctor, self.iterable = doctor, iterable

    def __iter__(self) -> Iterator[Any]:
        return self.doctor._iterate(self.iterable)

    def __len__(self) -> int:
        return len(self.iterable)

    # A watched loader can be handed to a framework in the loader's place
    # (docs/integrations.md): its position and epoch are the loader's.
    def state_dict(self) -> Any:
        return self.iterable.state_dict()

    def load_state_dict(self, state: Any) -> None:
        self.iterable.load_state_dict(state)

    def set_epoch(self, epoch: int) -> None:
        self.iterable.set_epoch(epoch)

    def __getattr__(self, name: str) -> Any:
        if name in ("doctor", "iterable"):  # not yet set (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.iterable, name)

    def report(self, **kwargs: Any) -> Report:
        try:
            return self.doctor.report(**kwargs)
        finally:
            self.doctor.detach()

    def close(self) -> None:
        self.doctor.detach()

    def __enter__(self) -> Watched:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Doctor:
    """Measures one training loop and diagnoses it.

    Args:
        step_fn: the loop's step, step_fn(batch); only used to measure the
            step alone (measure_capacity replays one cached batch through it,
            which runs real steps: use a copy of the model if that matters).
        device: "auto" times the device with CUDA events once the loop has
            used CUDA; False never does.
        cores: CPU cores the loop may use (default: as the engine counts
            them, the affinity mask capped by the cgroup's CPU quota).
        keep_steps: steps kept for the timeline and trace (all are counted).
        profile_steps: look inside this many steps with torch.profiler
            (Python stacks on): time in Python vs inside ops, the top ops,
            host-device syncs named by file and line, copies, and on CUDA
            the device's busy share (the report's "step" section and the
            step findings). The first steps after the first epoch's
            warm-up; the profiler slows them, so they are left out of the
            loop's timings. 0 (default): no profiling.
        what_if: for a torch DataLoader over an ImageFolder whose Compose
            feedline translates, the first report runs feedline.Loader with
            the same transform and batch size on `what_if_files` of the
            same files for at most `what_if_s` seconds and reports its rate
            (the report's "what_if" section and finding); where it cannot,
            the section says why. False: never.
        what_if_s, what_if_files: that run's time bound and sample size.

    Under torch.distributed (an initialised process group of more than one
    rank), report() is a collective: every rank calls it; it gathers each
    rank's wait and step times (and the time inside torch.distributed
    collectives, timed while watching) to every rank, names the slowest,
    and only rank 0 prints and writes the files (the job's one report,
    with a table per rank).

    While attached to a torch DataLoader, iterate it through watch(): its
    batches carry timings that watch() strips. Each epoch's end restores the
    loader, except one whose persistent workers stay alive between epochs
    (they were started with the probes, and detaching shuts them down): for
    that one detach() (or `with Doctor()`, or Watched.report()) restores it.
    Doctor.report() does not detach, so more epochs can follow.
    """

    def __init__(self, step_fn: Optional[Callable[[Any], Any]] = None, device: Union[str, bool] = "auto",
                 cores: Optional[int] = None, keep_steps: int = 100_000, profile_steps: int = 0,
                 what_if: bool = True, what_if_s: float = 3.0, what_if_files: int = 200) -> None:
        from ._report import available_cores
        from .ranks import CollectiveTimer
        self.what_if_enabled = bool(what_if)
        self.what_if_s, self.what_if_files = float(what_if_s), int(what_if_files)
        self._what_if: Optional[WhatIf] = None
        self.collectives = CollectiveTimer()
        self.collective_s: list[float] = []  # per kept step: time inside torch.distributed collectives
        self.ranks: Optional[Ranks] = None   # set by report() under torch.distributed
        from .step_profile import StepProfiler
        self.step_profiler = StepProfiler(profile_steps)
        self.step_fn = step_fn
        self.cores = cores or available_cores()
        self.keep_steps = keep_steps
        self.iterable: Any = None
        self.probe: Optional[Probe] = None
        self.steps: list[Step] = []
        # A token batch's field and seq_len, from the first batch (doctor/tokens.py); None: no tokens.
        self.token_field: Optional[tuple[str, int]] = None
        self._tokens_seen = False  # the first batch was looked at for tokens
        self.batch_keys: Optional[list[str]] = None  # the first batch's keys, when it was a dict (the what-if's check)
        self.epochs: list[dict[str, Any]] = []  # {index, t_iter, first_batch_s, steps, samples, t_end}
        self.t0: Optional[float] = None
        self.capacity: dict[str, Any] = {}
        self._device = _DeviceTimer(device if device is False else "auto", keep_steps)
        self.step_count = 0  # every step watched (self.steps keeps at most keep_steps)
        self._cached: Any = None
        self._h2d: Optional[HostToDevice] = None
        # [at the start (or the end of the first epoch's warm-up), at the last epoch's end]
        self.cpu_window: Optional[list[Optional[CpuPoint]]] = None
        # The framework's loop and the user's step (feedline.integrations): named in the report.
        self.loop_site: Optional[LoopSite] = None

    @property
    def h2d(self) -> Optional[HostToDevice]:
        """One cached batch's copy to the device, pageable and pinned (with CUDA, once measured)."""
        return self._h2d

    def device_summary(self, skip: int = 1) -> Optional[DeviceTiming]:
        """The device's busy and idle time over the steady state, or None when it was not timed."""
        s = self._device.summary(skip)
        return DeviceTiming.from_json(s) if s is not None else None

    # -- watching ------------------------------------------------------------
    def watch(self, iterable: Any, step_fn: Optional[Callable[[Any], Any]] = None) -> Watched:
        """Wraps the loop's data iterable; iterate the result as the loader."""
        if step_fn is not None:
            self.step_fn = step_fn
        self._attach(iterable)
        return Watched(self, iterable)

    def _attach(self, iterable: Any) -> Probe:
        if self.iterable is not None and iterable is not self.iterable:
            raise ValueError("a Doctor watches one data iterable; make another Doctor for another loop")
        if self.probe is None:
            self.iterable = iterable
            self.probe = probe_for(iterable)
        self.probe.attach()
        return self.probe

    def _iterate(self, iterable: Any) -> Iterator[Any]:
        run = _EpochRun(self, iterable)
        it = iter(iterable)
        try:
            while True:
                run.request()
                try:
                    raw = next(it)
                except StopIteration:
                    break
                batch = run.received(raw)
                del raw
                yield batch
                del batch
                run.step_done()
        finally:
            run.end(release=False)
            del it
            run.probe.release()  # after the iterator is gone (a DataLoader's workers stop first)

    def hooks(self, iterable: Any, loop: Optional[LoopSite] = None) -> StepHooks:
        """For a framework that iterates the loader itself and has callbacks
        around each step (feedline.integrations): the callbacks call the
        hooks instead of the loop iterating watch(). A feedline loader is
        looked into by its probe; any other loader (a torch DataLoader a
        framework wrapped) is timed from the outside. `loop` names the
        framework's loop and the user's step in the report."""
        if self.iterable is not None and iterable is not self.iterable:
            raise ValueError("a Doctor watches one data iterable; make another Doctor for another loop")
        if self.probe is None:
            self.iterable = iterable
            self.probe = FeedlineProbe(iterable) if is_feedline_loader(iterable) else NullProbe(iterable)
        if loop is not None:
            self.loop_site = loop
        return StepHooks(self, iterable)

    def _count_tokens(self, batch: Any) -> int:
        """Tokens of a token batch; whether batches are token batches is
        decided by the first one (so other loops pay one look)."""
        if not self._tokens_seen:
            self._tokens_seen = True
            f = token_field(batch)
            if f is not None:
                self.token_field = (f[0], int(f[1].shape[1]))
        if self.token_field is None:
            return 0
        f = token_field(batch)
        return int(f[1].numel()) if f is not None else 0

    def _finish_step(self, epoch: dict[str, Any], pending: tuple[float, float, int, float, float, float, int],
                     keep: bool = True, t_done: Optional[float] = None) -> None:
        t_done = _NOW() if t_done is None else t_done
        c2 = time.thread_time()
        self._device.step_end(epoch["index"])
        t_request, t_recv, samples, c0, c1, p0, tokens = pending
        if keep and len(self.steps) < self.keep_steps and self.collectives.installed:
            self.collective_s.append(self.collectives.take())
        self._record(epoch, t_request, t_recv - t_request, t_done - t_recv, samples, c2 - c1, c1 - c0,
                     time.process_time() - p0, keep, tokens)

    def _record(self, epoch: dict[str, Any], t_request: float, wait: float, step: float, samples: int,
                step_cpu: float, receive_cpu: float, process_cpu: float, keep: bool = True, tokens: int = 0) -> None:
        epoch["steps"] += 1
        epoch["samples"] += samples
        self.step_count += 1
        if keep and len(self.steps) < self.keep_steps:
            self.steps.append(Step(t_request, wait, step, samples, step_cpu, receive_cpu, epoch["index"], process_cpu,
                                   tokens))

    # -- capacity ---------------------------------------------------------------
    def measure_capacity(self, loader: Any = None, batches: int = 20, step_fn: Optional[Callable[[Any], Any]] = None,
                         steps: int = 10) -> dict[str, Any]:
        """Measures the loader alone (`batches` batches timed after the ones
        prepared ahead at the start, no step) and, with a step_fn, the step
        alone (one cached batch replayed `steps` times after a warm-up).
        Returns and keeps {"loader_samples_per_s", "step_samples_per_s"}."""
        loader = loader if loader is not None else self.iterable
        if loader is None:
            raise ValueError("measure_capacity needs a loader (or watch one first)")
        probe = self._attach(loader)
        step_fn = step_fn or self.step_fn
        warmup = probe.warmup_batches()
        it = iter(loader)
        arrivals: list[tuple[float, int]] = []  # (time, samples) per batch
        first = None
        for _ in range(warmup + batches):
            t_req = _NOW()
            try:
                raw = next(it)
            except StopIteration:
                break
            t = _NOW()
            batch = probe.unwrap(raw, t_req, t, -1, capacity=True)
            del raw
            if not arrivals:
                first = clone_batch(batch) if step_fn is not None and self._cached is None else None
                probe.note_batch(batch)
            arrivals.append((t, count_samples(batch)))
            del batch
        del it
        probe.release()
        # Leave out the batches that were ready at once (but keep at least half).
        skip = min(warmup, len(arrivals) // 2)
        if len(arrivals) - skip >= 2:
            (t0, _), timed = arrivals[skip], arrivals[skip + 1:]
            if timed[-1][0] > t0:
                self.capacity["loader_samples_per_s"] = sum(n for _, n in timed) / (timed[-1][0] - t0)
                self.capacity["loader_batches"] = len(timed)
        if step_fn is not None:
            batch = self._cached if self._cached is not None else first
            if batch is not None:
                self._cached = batch
                self.capacity["step_samples_per_s"] = self._replay(step_fn, batch, steps)
        if self._device.enabled or _cuda_in_use():  # only when the loop really uses CUDA
            self._measure_h2d()
        return dict(self.capacity)

    def _replay(self, step_fn: Callable[[Any], Any], batch: Any, steps: int) -> Optional[float]:
        sync = _cuda_sync()
        times = []
        for _ in range(steps + 1):  # the first is warm-up
            sync()
            t = _NOW()
            step_fn(batch)
            sync()
            times.append(_NOW() - t)
        mean = sum(times[1:]) / max(1, len(times) - 1)
        return count_samples(batch) / mean if mean > 0 else None

    def _measure_h2d(self) -> None:
        """With CUDA: one cached batch copied from pageable and from pinned
        memory (the evidence for pin_memory)."""
        if self._h2d is not None or self._cached is None:
            return
        try:
            import torch
            if not torch.cuda.is_available():
                return
            tensors = [t for t in _tensors(self._cached) if t.device.type == "cpu"]
            if not tensors:
                return

            def copy(ts: list[Any]) -> float:
                torch.cuda.synchronize()
                t = _NOW()
                for x in ts:
                    x.to("cuda", non_blocking=True)
                torch.cuda.synchronize()
                return _NOW() - t
            copy(tensors)  # warm-up
            pageable = copy(tensors)
            t = _NOW()
            pinned = [x.pin_memory() for x in tensors]
            pin = _NOW() - t
            self._h2d = HostToDevice(pageable_s=pageable, pinned_s=copy(pinned), pin_s=pin)
        except Exception:  # noqa: BLE001 - a failed copy only loses the pin_memory evidence
            self._h2d = None

    # -- results -------------------------------------------------------------------
    def evidence(self) -> dict[str, Any]:
        """Everything measured, as the report's JSON minus its findings
        (evidence.Evidence.to_json(); its "probes" section says what the
        probes could attach, and why not)."""
        from ._report import build_evidence
        if self._device.pairs and self._cached is not None:
            self._measure_h2d()
        return build_evidence(self).to_json()

    def report(self, file: Optional[TextIO] = sys.stdout, json: Any = None, html: Any = None,
               trace: Any = None) -> Report:
        """Diagnoses what was measured. Prints the terminal summary to
        `file` (None: nothing), writes the JSON, HTML and trace files asked
        for, and returns the Report."""
        from ._report import Report
        from .ranks import gather
        self.ranks = gather(self)  # a collective under torch.distributed; None otherwise
        r = Report.from_doctor(self)
        if self.ranks is not None and _rank() != 0:
            return r  # the job's report is rank 0's
        if file is not None:
            print(r.summary(), file=file)
        if json:
            r.save_json(json)
        if html:
            r.save_html(html)
        if trace:
            r.save_trace(trace)
        return r

    def what_if(self) -> Optional[WhatIf]:
        """What feedline would give (what_if.py): run once, on the first call
        after a torch DataLoader was watched; None when not asked for or not
        a torch DataLoader."""
        if not self.what_if_enabled or self.probe is None or self.probe.kind != "torch" or not self.step_count:
            return self._what_if
        if self._what_if is None:
            from . import what_if
            transforms, collate = self.probe.originals()  # type: ignore[attr-defined]
            self._what_if = what_if.run(self.iterable, transforms, collate, files=self.what_if_files,
                                        seconds=self.what_if_s, batch_keys=self.batch_keys)
        return self._what_if

    def detach(self) -> None:
        """Restores the loader (dataset, transforms, collate_fn, worker_init_fn)."""
        if self.probe is not None:
            self.probe.detach()

    def __enter__(self) -> Doctor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.detach()


def system_busy_s() -> Optional[float]:
    """CPU seconds all cores of the machine have been busy since boot
    (/proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _cpu_point(steps: int) -> CpuPoint:
    return CpuPoint(_NOW(), system_busy_s(), time.process_time(), steps)


def _rank() -> int:
    import torch.distributed as dist
    return int(dist.get_rank())


def _cuda_in_use() -> bool:
    """CUDA is available and this process has initialised it."""
    try:
        import torch
        return bool(torch.cuda.is_available() and torch.cuda.is_initialized())
    except Exception:
        return False


def _cuda_sync() -> Callable[[], None]:
    try:
        import torch
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            return torch.cuda.synchronize
    except Exception:
        pass
    return lambda: None


def watch(iterable: Any, step_fn: Optional[Callable[[Any], Any]] = None, **kwargs: Any) -> Watched:
    """A new Doctor watching `iterable`: `w = watch(loader); for b in w: ...;
    w.report()` (w.doctor is the Doctor; w.report() restores the loader)."""
    d = Doctor(step_fn=step_fn, **kwargs)
    w = d.watch(iterable)
    return w
