"""Probes that time a torch DataLoader from the outside.

The user's dataset, transforms and collate_fn run in worker processes (or in
the training process when num_workers=0). These probes time them wherever
they run (the dataset through a subclass of its own class, timed_class, so
its type is kept; _torch_compat.py installs them all and checks torch's side
first) and carry the timings back *inside the batch*: the collate wrapper
returns a ProbedBatch (the real batch plus its timings), which travels
through torch's own queues and pin-memory thread and is unwrapped by
Doctor.watch before the training loop sees it. So nothing needs a side
channel, timings match their batch exactly, and spawn-started workers work
too (every probe is a module-level, picklable class; a timed dataset
pickles as its own class and is timed again where it is rebuilt).

Times are time.perf_counter() (CLOCK_MONOTONIC on Linux, the same clock in
every process of the machine), so worker spans line up with the training
loop's timeline. Each timed call also reads its thread's CPU time and
run-queue wait (/proc/thread-self/schedstat), which splits wall time into
computing, waiting for a core (too many processes) and blocking (I/O, sleep).
"""
from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator, Optional, Protocol, Sequence

from .evidence import (
    CollateTiming,
    Evidence,
    InitTiming,
    MemorySample,
    PinTiming,
    ProbeStatus,
    SampleTiming,
    TransformTiming,
)

if TYPE_CHECKING:
    from ._report import Span
    from .watch import Doctor

_NOW = time.perf_counter
_MEMORY_PERIOD_S = 0.5  # how often a worker samples its own memory


class Probe(Protocol):
    """What the Doctor needs from the probe of one loader kind
    (torch_loader.TorchProbe, feedline_loader.FeedlineProbe,
    watch.NullProbe; watch.PROBE_KINDS picks one). A probe looks into the
    loader while the Doctor watches it and turns what it saw into the
    report's section for its kind."""

    kind: ClassVar[str]  # the report's loader.kind, and the rules' kind (rules/)

    def attach(self) -> None:
        """Installs what the probe needs on the loader (idempotent)."""

    def detach(self) -> None:
        """Puts the loader back as it was (idempotent)."""

    def release(self) -> None:
        """At an epoch's end: detach, unless that would cost the loader something."""

    def unwrap(self, batch: Any, t_request: float, t_received: float, epoch: int, capacity: bool = False) -> Any:
        """The loop's batch, from what the loader's iterator returned."""

    def note_batch(self, batch: Any) -> None:
        """Sees one delivered batch (its size and shape)."""

    def warmup_batches(self) -> int:
        """Batches that may be ready at once when an epoch starts."""
        ...

    def settings(self) -> dict[str, Any]:
        """The loader's settings (the report's loader.settings)."""
        ...

    def status(self) -> Optional[ProbeStatus]:
        """What could be attached, and why not (the report's "probes"), or None."""

    def add_evidence(self, ev: Evidence, doctor: Doctor) -> None:
        """Adds this kind's section to the evidence."""

    def spans(self, t0: float) -> list[Span]:
        """Loader-side spans for the trace, relative to t0."""
        ...


# -- per-thread CPU and run-queue clocks -----------------------------------
_tls = threading.local()


class _SchedStat:
    """This thread's /proc/thread-self/schedstat, open for pread; closed
    when the thread (and so its thread-local) goes."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        try:
            self.fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self.fd = -1

    def __del__(self) -> None:
        if self.fd >= 0 and self.pid == os.getpid():
            os.close(self.fd)


def thread_clocks() -> tuple[float, float]:
    """(cpu_s, runqueue_wait_s) of the calling thread so far. CPU time comes
    from CLOCK_THREAD_CPUTIME_ID (schedstat's own CPU figure lags by the
    current time slice); the run-queue wait from /proc/thread-self/schedstat,
    which only changes when the thread is scheduled in, so reading it while
    running is exact. Without schedstat the wait reads as 0."""
    h = getattr(_tls, "schedstat", None)
    if h is None or h.pid != os.getpid():
        h = _tls.schedstat = _SchedStat()
    fd = h.fd
    runq = 0.0
    if fd >= 0:
        try:
            runq = int(os.pread(fd, 128, 0).split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            pass
    return time.thread_time(), runq


def memory_sample() -> MemorySample:
    """(rss, pss, private) bytes of this process; pss/private from
    smaps_rollup (shared pages counted once), else rss for all three."""
    try:
        with open("/proc/self/smaps_rollup") as f:
            kb = {}
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                    kb[parts[0][:-1]] = int(parts[1])
        private = kb.get("Private_Clean", 0) + kb.get("Private_Dirty", 0)
        return MemorySample(kb.get("Rss", 0) * 1024, kb.get("Pss", 0) * 1024, private * 1024)
    except OSError:
        try:
            with open("/proc/self/statm") as f:
                rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            return MemorySample(rss, rss, rss)
        except (OSError, ValueError, IndexError):
            return MemorySample(0, 0, 0)


# -- the per-process record buffer -----------------------------------------
class _Records:
    """What this process measured since its last batch. Reset on fork: a
    forked worker must not ship its parent's records."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.samples: list[SampleTiming] = []
        self.transforms: list[TransformTiming] = []
        self.depth = 0         # nesting of timed __getitem__ calls
        self.start_runq = 0.0  # run-queue clock when the batch's first sample started
        self.init: Optional[InitTiming] = None  # of worker_init_fn, shipped once
        self.last_memory_t = -1e9
        self.reference_collate_done = False


_records: Optional[_Records] = None


def records() -> _Records:
    global _records
    if _records is None or _records.pid != os.getpid():
        _records = _Records()
    return _records


def _timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float, float, float, float, float]:
    """(fn(*args), start, wall, cpu, run-queue wait, run-queue clock at start)."""
    t0 = _NOW()
    c0, q0 = thread_clocks()
    out = fn(*args)
    c1, q1 = thread_clocks()
    return out, t0, _NOW() - t0, c1 - c0, q1 - q0, q0


def _pixels(x: Any) -> int:
    size = getattr(x, "size", None)  # PIL images: (w, h)
    if isinstance(size, tuple) and len(size) == 2 and all(isinstance(v, int) for v in size):
        return size[0] * size[1]
    shape = getattr(x, "shape", None)  # tensors / arrays: [..., H, W] or HWC
    if shape is not None and len(shape) >= 2:
        dims = list(shape)
        if len(dims) == 3 and dims[-1] in (1, 3, 4) and dims[0] > 4:
            return int(dims[0] * dims[1])  # HWC
        return int(dims[-1] * dims[-2])
    return 0


# -- the dataset's timed methods ---------------------------------------------
def _record_samples(r: _Records, t0: float, wall: float, cpu: float, runq: float, q0: float,
                    indices: Sequence[Any]) -> None:
    """Records one timed call that produced len(indices) samples, its time
    split evenly over them (only the outermost timed call records)."""
    if r.depth != 0:
        return
    if not r.samples:
        r.start_runq = q0
    n = len(indices)
    if n == 0:
        return
    w, c, q = wall / n, cpu / n, runq / n
    for i, index in enumerate(indices):
        r.samples.append(SampleTiming(t0 + i * w, w, c, q, index if isinstance(index, int) else -1))


def _timed_call(fn: Callable[..., Any], args: tuple[Any, ...], indices: Sequence[Any]) -> Any:
    """fn(*args), timed and recorded as the samples `indices`; transforms
    and nested dataset calls inside it record under it (depth > 0)."""
    r = records()
    r.depth += 1
    try:
        out, t0, wall, cpu, runq, q0 = _timed(fn, *args)
    finally:
        r.depth -= 1
    _record_samples(r, t0, wall, cpu, runq, q0, indices)
    return out


def _timed_getitem(self: Any, index: Any) -> Any:
    # A batched-index sampler (batch_size=None) passes a list of indices: one call, many samples.
    return _timed_call(type(self)._feedline_base.__getitem__, (self, index),
                       index if type(index) is list else (index,))


def _timed_getitems(self: Any, indices: Sequence[Any]) -> Any:
    return _timed_call(type(self)._feedline_base.__getitems__, (self, indices), list(indices))


def _timed_iter(self: Any) -> Iterator[Any]:
    return timed_iterator(type(self)._feedline_base.__iter__(self))


def _timed_reduce_ex(self: Any, protocol: int) -> Any:
    from ._torch_compat import reduce_timed
    return reduce_timed(self, protocol)


_timed_classes: dict[type, type] = {}  # user's class -> its timed subclass, one per process


def timed_class(base: type) -> type:
    """The subclass of the user's dataset class that the doctor gives a
    dataset while it watches: same name, module and layout (no slots, so
    the instance's class can be swapped in place and back), every method the
    user's, except that __getitem__ / __getitems__ (map-style) or __iter__
    (IterableDataset) are timed, each only where the user's class has it.
    isinstance(ds, UserClass) and every isinstance check torch makes answer
    as for the user's class. Made with the class's own metaclass; the methods
    are set after creation, so a metaclass that rewrites __iter__ at class
    creation (IterDataPipe's) keeps wrapping only the user's."""
    cls = _timed_classes.get(base)
    if cls is not None:
        return cls
    from torch.utils.data import IterableDataset
    ns = {"__slots__": (), "__module__": base.__module__, "__qualname__": base.__qualname__,
          "__doc__": base.__doc__, "_feedline_base": base}
    cls = type(base)(base.__name__, (base,), ns)
    methods: dict[str, Callable[..., Any]] = {"__reduce_ex__": _timed_reduce_ex}
    if issubclass(base, IterableDataset):
        if callable(getattr(base, "__iter__", None)):
            methods["__iter__"] = _timed_iter
    else:
        if callable(getattr(base, "__getitem__", None)):
            methods["__getitem__"] = _timed_getitem
        if getattr(base, "__getitems__", None):  # torch's fetcher checks it is there and truthy
            methods["__getitems__"] = _timed_getitems
    for name, fn in methods.items():
        type.__setattr__(cls, name, fn)
    _timed_classes[base] = cls
    return cls


def is_timed(ds: Any) -> bool:
    """Whether `ds` is a dataset timed by the doctor (its class swapped, or a TimedContainer)."""
    return "_feedline_base" in type(ds).__dict__ or isinstance(ds, TimedContainer)


class _TimedIterator:
    """Stands in for iter(dataset): times each item's production."""

    __slots__ = ("it",)

    def __init__(self, it: Iterator[Any]) -> None:
        self.it = it

    def __iter__(self) -> _TimedIterator:
        return self

    def __next__(self) -> Any:
        r = records()
        r.depth += 1
        try:
            out, t0, wall, cpu, runq, q0 = _timed(next, self.it)
        finally:
            r.depth -= 1
        _record_samples(r, t0, wall, cpu, runq, q0, (-1,))
        return out


class _TimedStatefulIterator(_TimedIterator):
    """A timed iterator over one with state_dict / load_state_dict, which
    torchdata's StatefulDataLoader saves and restores (its Stateful check
    is by attribute): forwarded, so a resume loads the iterator's own state
    rather than fast-forwarding it."""

    __slots__ = ()

    def state_dict(self) -> Any:
        return self.it.state_dict()  # type: ignore[attr-defined]

    def load_state_dict(self, state_dict: Any) -> Any:
        return self.it.load_state_dict(state_dict)  # type: ignore[attr-defined]


def timed_iterator(it: Iterator[Any]) -> _TimedIterator:
    stateful = hasattr(it, "state_dict") and hasattr(it, "load_state_dict")
    return (_TimedStatefulIterator if stateful else _TimedIterator)(it)


class TimedContainer:
    """Stands in, on the loader, for a dataset that is not a torch Dataset
    (a list, a tensor, a Hugging Face dataset), which torch only indexes,
    measures with len() and asks for __getitems__: times every __getitem__
    (and __getitems__, when the dataset has one: TimedContainer(ds) is then
    a _TimedBatchedContainer, so that hasattr(wrapper, "__getitems__"), which
    torch's fetcher checks, answers as for ds). Reads and writes of other
    attributes go to the dataset."""

    _own = ("dataset",)

    def __new__(cls, dataset: Any = None) -> TimedContainer:
        if cls is TimedContainer and getattr(dataset, "__getitems__", None):
            cls = _TimedBatchedContainer
        return object.__new__(cls)

    def __init__(self, dataset: Any) -> None:
        object.__setattr__(self, "dataset", dataset)

    def __getattr__(self, name: str) -> Any:  # only called for attributes not found here
        if name in type(self)._own:  # not set yet (while unpickling)
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in type(self)._own:
            object.__setattr__(self, name, value)
        else:
            setattr(self.dataset, name, value)

    def __delattr__(self, name: str) -> None:
        if name in type(self)._own:
            object.__delattr__(self, name)
        else:
            delattr(self.dataset, name)

    # Explicit, so that pickling (spawn-started workers) never reaches the
    # dataset's own __getstate__ / __setstate__ through __getattr__.
    def __getstate__(self) -> dict[str, Any]:
        return {"dataset": self.dataset}

    def __setstate__(self, state: dict[str, Any]) -> None:
        object.__setattr__(self, "dataset", state["dataset"])

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: Any) -> Any:
        return _timed_call(self.dataset.__getitem__, (index,), index if type(index) is list else (index,))


class _TimedBatchedContainer(TimedContainer):
    def __getitems__(self, indices: Sequence[Any]) -> Any:
        return _timed_call(self.dataset.__getitems__, (indices,), list(indices))


class TimedTransform:
    """Replaces one entry of a torchvision Compose; records its time under
    the sample being loaded. Only inside a timed __getitem__ / __getitems__
    / iterable item: a Compose shared with another loader (validation) runs
    untimed there."""

    def __init__(self, transform: Callable[..., Any], index: int) -> None:
        self.transform = transform
        self.index = index

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # torchvision's v2 Compose passes (image, target, ...)
        r = records()
        if r.depth == 0:
            return self.transform(*args, **kwargs)
        out, t0, wall, cpu, runq, _ = _timed(lambda: self.transform(*args, **kwargs))
        r.transforms.append(TransformTiming(len(r.samples), self.index, t0, wall, cpu, runq,
                                            _pixels(args[0]) if args else 0))
        return out

    def __repr__(self) -> str:
        return repr(self.transform)


class TimedWorkerInit:
    """Wraps (or stands in for) worker_init_fn to time each worker's set-up."""

    def __init__(self, fn: Optional[Callable[[int], Any]]) -> None:
        self.fn = fn

    def __call__(self, worker_id: int) -> None:
        t0 = _NOW()
        before = memory_sample()  # the baseline for this worker's memory growth
        if self.fn is not None:
            self.fn(worker_id)
        records().init = InitTiming(t0, _NOW() - t0, before)


class TimedCollate:
    """Wraps collate_fn: times it and returns a ProbedBatch carrying every
    timing this process recorded for the batch."""

    def __init__(self, collate_fn: Callable[[Any], Any], is_default: bool) -> None:
        self.collate_fn = collate_fn
        self.is_default = is_default

    def __call__(self, samples: Any) -> ProbedBatch:
        out, t0, wall, cpu, runq, q0 = _timed(self.collate_fn, samples)
        r = records()
        # The whole process's CPU time (every thread: the queue's feeder thread
        # pickles finished batches): between two batches of one worker it is
        # everything that batch cost, IPC included.
        info: dict[str, Any] = {"pid": r.pid, "worker": _worker_id(), "samples": r.samples, "transforms": r.transforms,
                "collate": CollateTiming(t0, wall, cpu, runq), "end": t0 + wall, "process_cpu": time.process_time(),
                "runq_start": r.start_runq if r.samples else q0, "runq_end": q0 + runq}
        if r.init is not None:
            info["init"], r.init = r.init, None
        if not self.is_default and not r.reference_collate_done:
            # What torch's default collate would cost on the same samples, once
            # per worker: the yardstick for a custom collate_fn.
            r.reference_collate_done = True
            try:
                from torch.utils.data import default_collate
                t = _NOW()
                default_collate(samples)
                info["collate_reference"] = _NOW() - t
            except Exception:  # samples default_collate cannot handle
                pass
        now = _NOW()
        if now - r.last_memory_t >= _MEMORY_PERIOD_S:
            r.last_memory_t = now
            info["memory"] = memory_sample()
        r.samples, r.transforms = [], []
        return ProbedBatch(out, info)


def _worker_id() -> int:
    try:
        from torch.utils.data import get_worker_info
        w = get_worker_info()
        return -1 if w is None else int(w.id)
    except Exception:  # noqa: BLE001 - no torch worker info: the training process
        return -1


class ProbedBatch:
    """A batch plus the timings of its making. Doctor.watch unwraps it; if
    one escapes (a loop that iterates the loader directly while the doctor is
    attached) it still unpacks, indexes and forwards attributes like the
    batch it carries."""

    __slots__ = ("data", "info")

    def __init__(self, data: Any, info: dict[str, Any]) -> None:
        self.data, self.info = data, info

    def __reduce__(self) -> tuple[type, tuple[Any, dict[str, Any]]]:
        return ProbedBatch, (self.data, self.info)

    def pin_memory(self, *args: Any) -> ProbedBatch:
        # torch's pin-memory thread (and the single-process iterator) calls
        # this for objects it does not know: time the pin of the real batch,
        # pinned by torch's own function (_torch_compat checked it attaches).
        from ._torch_compat import pin_function
        pin = pin_function()
        t0 = _NOW()
        data = pin(self.data, *args)
        self.info["pin"] = PinTiming(t0, _NOW() - t0)
        return ProbedBatch(data, self.info)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, key: Any) -> Any:
        return self.data[key]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.data, name)
