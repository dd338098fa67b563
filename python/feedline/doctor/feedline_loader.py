"""Evidence from a feedline Loader: the engine already counts everything
(per-op items and busy time, per-worker busy / waiting for input / blocked
on output, ring depth and bytes, consumer wait; docs/engine.md "Metrics"), so
the doctor only takes a snapshot when it starts watching and another when it
reports, and works on the difference."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, ClassVar, Optional, Union

from .evidence import ErrorCounts, Evidence, FeedlineEvidence, ObjectStore, OpTimes, ProbeStatus, Tuner
from .tokens import is_token_loader

if TYPE_CHECKING:
    from ._report import Span
    from .watch import Doctor

Stats = dict[str, Any]  # a loader.stats() snapshot (docs/engine.md "Metrics")


def is_feedline_loader(obj: Any) -> bool:
    try:
        from ..loader import Loader
    except ImportError:
        return False
    return isinstance(obj, Loader)


def source_kind(source: Union[str, bytes, os.PathLike[str]]) -> str:
    """The doctor's name for a source's kind: "url", "packed", "tar",
    "folder", "list" or "columnar". The rule itself is the engine's (feedline._C.source_kind), so
    the doctor and the loader never disagree about a path."""
    from .. import _C
    path = os.fsdecode(source)
    kind = str(_C.source_kind(os.fsencode(path)))
    if kind == "shards":
        return "url" if path.startswith(("http://", "https://")) else "packed"
    return kind


def stats_delta(s0: Optional[Stats], s1: Stats) -> FeedlineEvidence:
    """Per-stage evidence from two loader.stats() snapshots (s0 may be None:
    since the loader was made)."""
    def ops(s: Optional[Stats]) -> dict[str, Any]:
        return {o["name"]: o for o in (s or {}).get("ops", [])}
    o0, o1 = ops(s0), ops(s1)
    out_ops = []
    for name, o in o1.items():
        b = o0.get(name, {"items": 0, "busy_s": 0.0, "errors": 0})
        items = o["items"] - b["items"]
        busy = o["busy_s"] - b["busy_s"]
        op = OpTimes(name=name, items=items, busy_s=busy, errors=o["errors"] - b["errors"],
                     per_item_s=busy / items if items else 0.0, python=bool(o.get("python")))
        if op.python:
            op.gil_wait_s = o.get("gil_wait_s", 0.0) - b.get("gil_wait_s", 0.0)
            op.gil_held_s = o.get("gil_held_s", 0.0) - b.get("gil_held_s", 0.0)
        out_ops.append(op)

    def wsum(s: Optional[Stats], key: str) -> Any:
        return sum(w[key] for w in (s or {}).get("workers", []))
    threads = s1.get("num_threads") or len(s1.get("workers", [])) or 1
    uptime = s1["uptime_s"] - ((s0 or {}).get("uptime_s") or 0.0)
    busy = wsum(s1, "busy_s") - wsum(s0, "busy_s")
    samples = wsum(s1, "samples") - wsum(s0, "samples")
    c0, c1 = (s0 or {}).get("consumer", {}), s1.get("consumer", {})
    return FeedlineEvidence(
        num_threads=threads, uptime_s=uptime, ops=out_ops, samples=samples,
        busy_s=busy,
        wait_input_s=wsum(s1, "wait_input_s") - wsum(s0, "wait_input_s"),
        blocked_output_s=wsum(s1, "blocked_output_s") - wsum(s0, "blocked_output_s"),
        utilisation=busy / (threads * uptime) if uptime > 0 else None,
        consumer_wait_s=c1.get("wait_s", 0.0) - c0.get("wait_s", 0.0),
        ring=dict(s1.get("ring", {})),
        errors=ErrorCounts(total=s1.get("errors", {}).get("total", 0),
                           skipped=s1.get("errors", {}).get("skipped", 0)),
        tuner=_tuner(s1),
        object_store=_object_store(s0, s1, uptime),
    )


def _object_store(s0: Optional[Stats], s1: Stats, wall_s: float) -> Optional[ObjectStore]:
    """The window's object-store requests, from two stats()["object_store"] snapshots."""
    b = s1.get("object_store")
    if not b:
        return None
    a = (s0 or {}).get("object_store") or {}

    def d(k: str) -> Any:
        return b.get(k, 0) - a.get(k, 0)
    requests, gets, busy = d("requests"), d("gets"), d("busy_s")
    return ObjectStore(
        requests=requests, retries=d("retries"), gets=gets, bytes=d("bytes"), wall_s=wall_s,
        request_s=busy / requests if requests else 0.0,
        first_byte_s=d("first_byte_s") / gets if gets else 0.0,
        bytes_per_s_per_connection=d("bytes") / busy if busy > 0 else 0.0,
        concurrency=busy / wall_s if wall_s > 0 else 0.0,
        peak_in_flight=int(b.get("peak_in_flight", 0)))


def _tuner(s: Stats) -> Optional[Tuner]:
    """What the autotuner chose and why (docs/tuner.md), for the report:
    the keys of stats()'s tuner section that the Tuner record names."""
    t = s.get("tuner")
    if not t:
        return None
    return Tuner(**{k: t[k] for k in Tuner.keys() if k in t})


def python_members(translation: Any) -> list[dict[str, Any]]:
    """The members of a split Compose that run in Python (docs/python_ops.md),
    each with its position, its name (a class's or a function's), its repr,
    its torchvision class (None for a user
    op) and whether feedline runs that class natively elsewhere in a Compose
    (a RandomHorizontalFlip after a user op is in the Python middle only
    because of where it stands). The rules read this, not torchvision."""
    if translation is None or not getattr(translation, "python_members", None):
        return []
    from .. import _tv
    objs = dict(_tv._flatten(translation.source))
    out = []
    for m in translation.python_members:
        obj = objs.get(m.position)
        name = _tv._tv_name(obj)[0] if obj is not None else None
        native = name is not None and (name in _tv._PREFIX_MEMBERS or _tv._suffix_step(obj, True) is not None)
        label = name or (getattr(obj, "__name__", None) if hasattr(obj, "__code__") else type(obj).__name__)
        out.append({"position": m.position, "name": label or m.member, "member": m.member, "torchvision": name,
                    "native": native})
    return out


class FeedlineProbe:
    """Reads a feedline Loader's metrics; changes nothing."""

    kind: ClassVar[str] = "feedline"

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self._s0: Optional[Stats] = None
        self._last: Optional[Stats] = None

    def attach(self) -> None:
        if self._s0 is None:
            self._s0 = self._stats()

    def detach(self) -> None:
        self._last = self._stats() or self._last

    def release(self) -> None:
        pass  # nothing to restore: the probe changes nothing

    def _stats(self) -> Optional[Stats]:
        try:
            return self.loader.stats()
        except Exception:  # noqa: BLE001 - closed
            return None

    def unwrap(self, batch: Any, t_request: float, t_received: float, epoch: int, capacity: bool = False) -> Any:
        return batch

    def note_batch(self, batch: Any) -> None:
        pass

    def status(self) -> Optional[ProbeStatus]:
        return None  # nothing to attach

    def spans(self, t0: float) -> list[Span]:
        return []

    def add_evidence(self, ev: Evidence, doctor: Doctor) -> None:
        ev.feedline = self.evidence()

    def warmup_batches(self) -> int:
        """Batches that may be ready before the loop starts (the ring)."""
        s = self._stats() or {}
        return max(1, (s.get("ring", {}).get("buffers_allocated") or 2) - 1)

    def settings(self) -> dict[str, Any]:
        ld = self.loader
        s = self._stats() or self._last or {}
        ring = s.get("ring", {})
        out = {"num_threads": ld.num_threads if not ld._loader.closed else s.get("num_threads"),
               "batch_size": ld.batch_size, "ring_buffers": ring.get("buffers_allocated"),
               "source": ld.source}
        if is_token_loader(ld):
            # Token windows: no image transform (the Loader's default is not used).
            out.update(source_kind="tokens", transform=None, seq_len=ld.seq_len, packing=ld.packing,
                       device=None if ld.device is None else str(ld.device))
            return out
        tf = getattr(ld, "transform", None)
        # What the engine opened (an s3:// prefix is told by its listing), else the path rule.
        kind = getattr(ld._loader, "source_kind", "") or source_kind(ld.source)
        return {**out, "source_kind": kind,
                "transform": None if tf is None else {
                    "crop": str(getattr(tf, "crop", "")).split(".")[-1], "height": getattr(tf, "height", None),
                    "width": getattr(tf, "width", None), "dtype": str(getattr(tf, "dtype", "")).split(".")[-1],
                    "dct_scaling": getattr(tf, "dct_scaling", None)},
                "python_members": python_members(getattr(ld, "transform_source", None)),
                "python_workers": getattr(ld, "python_workers", 0)}

    def evidence(self) -> Optional[FeedlineEvidence]:
        s1 = self._stats() or self._last
        if s1 is None:
            return None
        ev = stats_delta(self._s0, s1)
        st = self.settings()
        ev.source_kind = st["source_kind"]
        tf = st.get("transform")
        if tf is not None:
            ev.exact_decode = (tf.get("dct_scaling") is False)
        return ev
