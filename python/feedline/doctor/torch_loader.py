"""Attaches the probes to a torch DataLoader and turns what they shipped
back into evidence: per-sample, per-transform, per-batch and per-worker
times, start-up per epoch, memory, and the loader's settings."""
from __future__ import annotations

import dataclasses
import os
import statistics
from typing import TYPE_CHECKING, Any, ClassVar, Iterator, NamedTuple, Optional

from . import _torch_compat, probes
from .evidence import (
    ABSENT,
    BatchTimes,
    CollateTiming,
    Evidence,
    Files,
    ImageInfo,
    InitTiming,
    Memory,
    MemorySample,
    NotAttached,
    PinTiming,
    ProbeStatus,
    SampleTiming,
    Startup,
    Times,
    TorchEvidence,
    TransformTimes,
    WorkerPool,
    WorkerRecord,
)

if TYPE_CHECKING:
    from ._report import Span
    from .watch import Doctor


class ProbedRecord(NamedTuple):
    """One batch the probes timed: what its worker shipped (probes.TimedCollate's
    info), when the loop asked for it and when it arrived, in which epoch."""
    info: dict[str, Any]
    t_request: float
    t_received: float
    epoch: int


@dataclasses.dataclass
class _TimeSum:
    wall_s: float = 0.0
    cpu_s: float = 0.0
    runq_s: float = 0.0

    def add(self, wall: float, cpu: float, runq: float) -> None:
        self.wall_s += wall
        self.cpu_s += cpu
        self.runq_s += runq


@dataclasses.dataclass
class _TransformSum(_TimeSum):
    count: int = 0
    pixels: float = 0       # summed over the calls that saw an input size
    pixels_n: int = 0


@dataclasses.dataclass
class _Worker:
    pid: int
    worker: int
    batches: int = 0
    busy_s: float = 0.0
    memory: list[MemorySample] = dataclasses.field(default_factory=list)

    def record(self) -> WorkerRecord:
        w = WorkerRecord(pid=self.pid, worker=self.worker, batches=self.batches, busy_s=self.busy_s)
        if self.memory:
            w.rss_max = max(m.rss for m in self.memory)
            w.pss_max = max(m.pss for m in self.memory)
            w.private_growth = max(0, self.memory[-1].private - self.memory[0].private)
        return w


def _times(wall: float, cpu: float, runq: float) -> Times:
    return Times(wall_s=wall, cpu_s=cpu, runq_s=runq, blocked_s=max(0.0, wall - cpu - runq))


def is_torch_loader(obj: Any) -> bool:
    try:
        from torch.utils.data import DataLoader
    except ImportError:
        return False
    return isinstance(obj, DataLoader)


def _name(obj: Any) -> str:
    """A short readable name: a function's name, a transform's repr when it
    is short and not the default <... object at 0x...>, else its class."""
    fn = getattr(obj, "__name__", None)
    if fn:
        return fn
    r = repr(obj)
    return r if len(r) <= 60 and "\n" not in r and not r.startswith("<") else type(obj).__name__


def _files(dataset: Any, limit: int = 256) -> Files:
    """Count and mean size of the files behind an ImageFolder-like dataset
    (samples = [(path, target)]), from a sample of at most `limit` stats."""
    for ds in _torch_compat.dataset_chain(dataset):
        samples = getattr(ds, "samples", None)
        if isinstance(samples, list) and samples and isinstance(samples[0], (tuple, list)) \
                and isinstance(samples[0][0], str):
            step = max(1, len(samples) // limit)
            sizes = []
            for s in samples[::step][:limit]:
                try:
                    sizes.append(os.path.getsize(s[0]))
                except OSError:
                    pass
            if sizes:
                return Files(count=len(samples), mean_bytes=sum(sizes) / len(sizes))
            return Files()
    return Files()


class TorchProbe:
    """Installs the probes on one DataLoader and collects the batches' timings.

    attach() installs them through _torch_compat.Attachment (the user's
    dataset, timed in place and type-preserving; the entries of its Compose,
    collate_fn and worker_init_fn); detach() puts every one back. When one
    of torch's internals the probes need is not as expected (or persistent
    workers already run without the probes), nothing is installed, for the
    rest of this probe's life: the loop is timed from the outside only and
    status() says what could not be attached and why. release() (each
    epoch's end) detaches unless persistent workers started with the probes
    are alive; detach() stops those (they run the probes' copies).
    """

    kind: ClassVar[str] = "torch"

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.batches: list[ProbedRecord] = []
        self.capacity_batches: list[ProbedRecord] = []
        self._att: Optional[_torch_compat.Attachment] = None  # the live one
        self.outside: list[dict[str, str]] = []  # why the probes could not attach: [{"part", "reason"}], sticky
        self.notes: list[dict[str, str]] = []    # optional probes that could not attach
        self.parts: list[str] = []               # what did attach
        self.compose: Any = None
        self.batch_bytes = 0     # of one delivered batch (note_batch)
        self.output_hw: Optional[list[int]] = None  # its images' height and width

    # -- installing -----------------------------------------------------------
    def attach(self) -> None:
        if self.outside or (self._att is not None and self._att.active):
            return
        att = _torch_compat.Attachment(self.loader)
        ok = att.attach()
        self._note(att)
        if not ok:
            self.outside = list(att.outside)
            return
        self._att = att
        if att.compose is not None:
            self.compose = att.compose

    def detach(self) -> None:
        if self._att is None:
            return
        self._att.detach()
        self._note(self._att)

    def release(self) -> None:
        """At an epoch's end: detach, unless the loader keeps persistent
        workers alive (started with the probes; detaching would shut them
        down and make the next epoch pay their start-up again)."""
        if self._att is None or not self._att.active or self._att.keeps_workers():
            return
        self.detach()

    def _note(self, att: _torch_compat.Attachment) -> None:
        for n in att.notes:
            if n not in self.notes:
                self.notes.append(n)
        for p in att.attached:
            if p not in self.parts:
                self.parts.append(p)

    def status(self) -> ProbeStatus:
        """The report's "probes" section: what was attached, and what could
        not be and why ("mode" "outside": the loop was timed from outside)."""
        import torch
        return ProbeStatus(torch_version=torch.__version__, mode="outside" if self.outside else "probes",
                           attached=[] if self.outside else list(self.parts),
                           not_attached=[NotAttached(**n) for n in self.outside + self.notes])

    def originals(self) -> tuple[Optional[list[Any]], Any]:
        """The Compose's entries and the collate_fn as the user gave them
        (None: not replaced, read them off the loader)."""
        att = self._att
        if att is None or not att.active:
            return None, None
        return (list(att.transforms) if att.transforms is not None else None), att.collate_fn

    def _user_dataset(self) -> Any:
        att = self._att
        return att.dataset if att is not None and att.active else _torch_compat.user_dataset(self.loader)

    # -- receiving --------------------------------------------------------------
    def unwrap(self, batch: Any, t_request: float, t_received: float, epoch: int, capacity: bool = False) -> Any:
        if isinstance(batch, probes.ProbedBatch):
            # The samples the batch holds (what the loop counts), beside the
            # dataset calls timed for it: they differ when one call makes many.
            batch.info["delivered"] = count_samples(batch.data, len(batch.info["samples"]))
            rec = ProbedRecord(batch.info, t_request, t_received, epoch)
            (self.capacity_batches if capacity else self.batches).append(rec)
            return batch.data
        return batch

    def warmup_batches(self) -> int:
        """Batches that can be ready when an epoch starts: each worker's
        first batches arrive together, up to prefetch_factor per worker."""
        ld = self.loader
        return max(1, ld.num_workers * (ld.prefetch_factor or 2)) if ld.num_workers else 1

    # -- settings and evidence ----------------------------------------------------
    def settings(self) -> dict[str, Any]:
        ld = self.loader
        att = self._att if self._att is not None and self._att.active else None
        ds = self._user_dataset()
        collate = att.collate_fn if att is not None else ld.collate_fn
        compose = self.compose or _torch_compat.find_compose(ds)
        tfs: Optional[list[Any]]
        if att is not None and att.transforms is not None:
            tfs = att.transforms
        else:
            tfs = list(compose.transforms) if compose is not None and isinstance(compose.transforms, list) else None
        return {
            "num_workers": ld.num_workers, "batch_size": ld.batch_size, "pin_memory": bool(ld.pin_memory),
            "persistent_workers": bool(ld.persistent_workers),
            "prefetch_factor": ld.prefetch_factor if ld.num_workers > 0 else None,
            "drop_last": bool(ld.drop_last), "timeout": ld.timeout,
            "multiprocessing_context": _torch_compat.start_method(ld),
            "dataset": _torch_compat.user_type(ds).__name__, "dataset_len": _safe_len(ds),
            "sampler": type(ld.sampler).__name__,
            "collate_fn": _name(collate), "transforms": [_name(t) for t in tfs] if tfs is not None else None,
        }

    def add_evidence(self, ev: Evidence, doctor: Doctor) -> None:
        assert ev.loop is not None
        ev.torch = self.evidence([s.wait_s for s in doctor.steps], ev.loop.wall_s)
        if ev.torch is not None and doctor.h2d:
            ev.torch.h2d = doctor.h2d

    def spans(self, t0: float) -> list[Span]:
        """Worker-side spans, relative to the doctor's start."""
        out: list[Span] = []
        for rec in self.batches[:20000]:
            info = rec.info
            lane = f"worker {info['worker']} (pid {info['pid']})" if info["worker"] >= 0 else "main (loading)"
            for sm in info["samples"]:
                out.append((lane, f"sample {sm.dataset_index}" if sm.dataset_index >= 0 else "sample", "getitem",
                            sm.t0 - t0, sm.wall_s))
            for tr in info["transforms"]:
                out.append((lane, f"transform {tr.transform}", "transform", tr.t0 - t0, tr.wall_s))
            c = info["collate"]
            out.append((lane, "collate", "collate", c.t0 - t0, c.wall_s))
            if info.get("init"):
                out.append((lane, "worker_init_fn", "startup", info["init"].t0 - t0, info["init"].wall_s))
            if info.get("pin"):
                out.append(("pin_memory thread", "pin", "pin", info["pin"].t0 - t0, info["pin"].wall_s))
        return out

    def evidence(self, waits: list[float], wall_loop: float) -> Optional[TorchEvidence]:
        """The "torch" section of the report (docs/doctor.md), given the
        loop's waits for data and its wall time."""
        batches = self.batches or self.capacity_batches
        if not batches:
            return None
        ds = self._user_dataset()
        n_samples = n_delivered = 0
        sw = sc = sq = 0.0
        tf: dict[int, _TransformSum] = {}
        coll = _TimeSum()
        ref: list[float] = []
        spans: list[float] = []
        over: list[float] = []
        pins: list[float] = []
        receive_lat: list[float] = []
        workers: dict[int, _Worker] = {}
        inits: list[float] = []
        decoded: list[float] = []
        for rec in batches:
            info = rec.info
            samples: list[SampleTiming] = info["samples"]
            n_samples += len(samples)
            n_delivered += info.get("delivered", len(samples))
            for tr in info["transforms"]:
                a = tf.setdefault(tr.transform, _TransformSum())
                a.add(tr.wall_s, tr.cpu_s, tr.runq_s)
                a.count += 1
                if tr.input_pixels:
                    a.pixels += tr.input_pixels
                    a.pixels_n += 1
            for sm in samples:
                sw += sm.wall_s
                sc += sm.cpu_s
                sq += sm.runq_s
            c: CollateTiming = info["collate"]
            coll.add(c.wall_s, c.cpu_s, c.runq_s)
            if "collate_reference" in info:
                ref.append(info["collate_reference"])
            start = samples[0].t0 if samples else c.t0
            span = info["end"] - start
            spans.append(span)
            over.append(span - sum(sm.wall_s for sm in samples) - c.wall_s)
            pin: Optional[PinTiming] = info.get("pin")
            if pin:
                pins.append(pin.wall_s)
            if rec.t_request < info["end"]:  # the consumer was already waiting: pure transfer
                receive_lat.append(max(0.0, rec.t_received - info["end"] - (pin.wall_s if pin else 0.0)))
            w = workers.setdefault(info["pid"], _Worker(info["pid"], info["worker"]))
            w.batches += 1
            w.busy_s += span
            if "init" in info:
                init: InitTiming = info["init"]
                inits.append(init.wall_s)
                w.memory.insert(0, init.memory)
            if "memory" in info:
                w.memory.append(info["memory"])
        hidden_cpu, gaps = self._between_batches(batches)
        nb = len(batches)
        # Per-sample means are per sample delivered, the loop's unit (the same
        # as per sample timed unless one dataset call makes many samples).
        ns = max(1, n_delivered)
        transforms_out = []
        names = self.settings().get("transforms") or []
        tf_total = _TimeSum()
        for idx in sorted(tf):
            a = tf[idx]
            transforms_out.append(TransformTimes(
                index=idx, name=names[idx] if idx < len(names) else f"transform {idx}",
                wall_s=a.wall_s / ns, cpu_s=a.cpu_s / ns, runq_s=a.runq_s / ns,
                input_pixels=(a.pixels / a.pixels_n) if a.pixels_n else None))
            tf_total.add(a.wall_s, a.cpu_s, a.runq_s)
            if a.pixels_n and not decoded:
                decoded.append(a.pixels / a.pixels_n)
        sample = _times(sw / ns, sc / ns, sq / ns)
        load = _times((sw - tf_total.wall_s) / ns, max(0.0, sc - tf_total.cpu_s) / ns,
                      max(0.0, sq - tf_total.runq_s) / ns)
        waits = sorted(waits)
        p10_wait = waits[len(waits) // 10] if waits else None
        receive = None
        if self.loader.num_workers > 0:
            cands = [v for v in (p10_wait, statistics.median(receive_lat) if receive_lat else None) if v is not None]
            receive = min(cands) if cands else None
        busy = sum(spans)
        n = self.loader.num_workers
        worker_list = [w.record() for w in workers.values()]
        return TorchEvidence(
            samples_timed=n_samples, batches_timed=nb,
            samples_per_batch=n_delivered / nb,
            sample=sample, load=load, transforms=transforms_out,
            batch=BatchTimes(collate_s=coll.wall_s / nb, collate_cpu_s=coll.cpu_s / nb,
                             collate_runq_s=coll.runq_s / nb,
                             collate_reference_s=statistics.median(ref) if ref else None,
                             worker_s=busy / nb, worker_overhead_s=max(0.0, statistics.median(over)),
                             worker_gap_s=gaps, worker_hidden_cpu_s=hidden_cpu,
                             pin_s=statistics.mean(pins) if pins else None, receive_s=receive,
                             bytes=self.batch_bytes),
            workers=WorkerPool(count=n, processes=len([w for w in worker_list if w.worker >= 0]), busy_s=busy,
                               utilisation=(busy / (n * wall_loop)) if n and wall_loop > 0 else None,
                               list=worker_list),
            startup=Startup(worker_init_s=statistics.mean(inits) if inits else None),
            memory=self._memory(worker_list),
            image=self._image_info(decoded), files=_files(ds),
        )

    @staticmethod
    def _memory(worker_list: list[WorkerRecord]) -> Memory:
        """Memory now: the training process's RSS; the workers' PSS (shared
        pages counted once), per worker slot its largest over epochs; and the
        largest growth of one worker's private memory while it loaded
        (copy-on-read: forked pages written by reference counting)."""
        slots: dict[int, int] = {}
        for w in worker_list:
            if w.pss_max is not ABSENT and w.worker >= 0:
                slots[w.worker] = max(slots.get(w.worker, 0), w.pss_max)
        now = probes.memory_sample()
        return Memory(main_rss=now.rss, main_pss=now.pss, workers_pss=sum(slots.values()),
                      max_private_growth=max((w.private_growth or 0 for w in worker_list), default=0))

    def _between_batches(self, batches: list[ProbedRecord]) -> tuple[Optional[float], Optional[float]]:
        """Per worker process, between two consecutive batches: the CPU the
        process spent beyond the batch's own samples and collate (the queue's
        feeder thread pickling, sharing tensors: per-batch IPC), median; and
        the wall gap from one batch's end to the next one's first sample,
        less the time spent waiting for a core, 25th percentile (a busy
        worker's gaps are its per-batch overhead; an idle one's are longer)."""
        if self.loader.num_workers == 0:
            return None, None
        by_pid: dict[int, list[dict[str, Any]]] = {}
        for rec in batches:
            by_pid.setdefault(rec.info["pid"], []).append(rec.info)
        hidden: list[float] = []
        gaps: list[float] = []
        for infos in by_pid.values():
            infos.sort(key=lambda i: i["end"])
            for a, b in zip(infos, infos[1:]):
                if "process_cpu" not in a or "process_cpu" not in b:
                    continue
                own = sum(sm.cpu_s for sm in b["samples"]) + b["collate"].cpu_s
                hidden.append(max(0.0, b["process_cpu"] - a["process_cpu"] - own))
                start = b["samples"][0].t0 if b["samples"] else b["collate"].t0
                waited_for_core = max(0.0, b.get("runq_start", 0.0) - a.get("runq_end", 0.0))
                gaps.append(max(0.0, start - a["end"] - waited_for_core))
        if not hidden:
            return None, None
        gaps.sort()
        return statistics.median(hidden), gaps[len(gaps) // 4]

    def note_batch(self, batch: Any) -> None:
        """Remembers the byte size and the image shape of a delivered batch."""
        if self.batch_bytes:
            return
        total, hw = 0, None
        for t in _tensors(batch):
            total += t.element_size() * t.nelement()
            if hw is None and t.dim() == 4:
                hw = ([int(t.shape[-2]), int(t.shape[-1])] if t.shape[1] in (1, 3, 4)
                      else [int(t.shape[1]), int(t.shape[2])])
        self.batch_bytes, self.output_hw = total, hw

    def _image_info(self, decoded: list[float]) -> ImageInfo:
        out = ImageInfo(output_hw=self.output_hw, decoded_pixels=decoded[0] if decoded else None,
                        decoded_aspect=None)
        ds = self._user_dataset()
        aspect = _first_image_aspect(ds)
        if aspect:
            out.decoded_aspect = aspect
        return out


def _first_image_aspect(dataset: Any) -> Optional[float]:
    """long/short side of a few of the dataset's images (PIL headers only)."""
    for ds in _torch_compat.dataset_chain(dataset):
        samples = getattr(ds, "samples", None)
        if isinstance(samples, list) and samples and isinstance(samples[0], (tuple, list)) \
                and isinstance(samples[0][0], str):
            try:
                from PIL import Image
            except ImportError:
                return None
            ratios = []
            for s in samples[:: max(1, len(samples) // 16)][:16]:
                try:
                    with Image.open(s[0]) as im:
                        w, h = im.size
                    ratios.append(max(w, h) / max(1, min(w, h)))
                except Exception:  # noqa: BLE001 - not an image PIL reads: no ratio
                    pass
            return sum(ratios) / len(ratios) if ratios else None
    return None


def count_samples(batch: Any, default: Optional[int] = None) -> int:
    """Samples in a batch: its first tensor's leading dimension; without a
    tensor `default` when given, else its length (a dict's first value's)."""
    for t in _tensors(batch):
        return int(t.shape[0]) if t.dim() > 0 else 1
    if default is not None:
        return default
    if isinstance(batch, dict) and batch:
        batch = next(iter(batch.values()))
        if isinstance(batch, (str, bytes)):
            return 1
    try:
        return len(batch)
    except TypeError:
        return 1


def _safe_len(ds: Any) -> Optional[int]:
    try:
        return len(ds)
    except Exception:  # noqa: BLE001 - a dataset without a length
        return None


def _tensors(batch: Any, depth: int = 0) -> Iterator[Any]:
    try:
        import torch
    except ImportError:
        return
    if isinstance(batch, torch.Tensor):
        yield batch
    elif depth < 3 and isinstance(batch, (list, tuple)):
        for b in batch:
            yield from _tensors(b, depth + 1)
    elif depth < 3 and isinstance(batch, dict):
        for b in batch.values():
            yield from _tensors(b, depth + 1)
