"""Across ranks: under torch.distributed, every rank's wait and step times
gathered (Doctor.report() is then a collective), the slowest rank named.

A straggler holds the other ranks at the next collective: on them the wait
shows as step time (inside all_reduce), so step times alone look even. What
tells the ranks apart is each one's own time per step: waiting for data
plus the step, less the time spent inside torch.distributed collectives,
which CollectiveTimer measures while the loop is watched by wrapping the
collectives of torch.distributed (all_reduce, barrier, ...) for the length
of the epoch. Collectives that do not go through those functions (DDP's
gradient buckets, reduced inside backward from C++) are not seen: then the
rank's own time is its wait plus its step's CPU time, and the section says
so (collectives_timed false).
"""
from __future__ import annotations

import os
import socket
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

from .evidence import RankRow, Ranks, steady_mask

if TYPE_CHECKING:
    from .watch import Doctor

_NOW = time.perf_counter

# The torch.distributed functions that block until the other ranks arrive (when not async_op).
COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "_all_gather_base", "reduce_scatter",
               "reduce_scatter_tensor", "_reduce_scatter_base", "broadcast", "reduce", "barrier", "all_to_all",
               "all_to_all_single", "gather", "scatter", "all_gather_object", "broadcast_object_list",
               "monitored_barrier")


def distributed() -> Optional[Any]:
    """torch.distributed when a process group of more than one rank is up, else None."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if not dist.is_available() or not dist.is_initialized() or dist.get_world_size() < 2:
        return None
    return dist


class CollectiveTimer:
    """Time inside torch.distributed collectives called while installed
    (only while a process group is up). Nested calls (all_gather_object
    calls all_gather) count once; take() returns and resets the sum."""

    def __init__(self) -> None:
        self.installed = False
        self.calls = 0
        self._sum = 0.0
        self._depth = 0
        self._saved: dict[str, Callable[..., Any]] = {}

    def install(self) -> None:
        dist = distributed()
        if dist is None or self.installed:
            return
        for name in COLLECTIVES:
            fn = getattr(dist, name, None)
            if callable(fn):
                self._saved[name] = fn
                setattr(dist, name, self._wrap(fn))
        self.installed = True

    def remove(self) -> None:
        if not self.installed:
            return
        import torch.distributed as dist
        for name, fn in self._saved.items():
            setattr(dist, name, fn)
        self._saved.clear()
        self.installed = False

    def take(self) -> float:
        s, self._sum = self._sum, 0.0
        return s

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._depth or kwargs.get("async_op"):
                return fn(*args, **kwargs)  # an outer call times it; an async one does not block here
            self._depth += 1
            t = _NOW()
            try:
                return fn(*args, **kwargs)
            finally:
                self._sum += _NOW() - t
                self.calls += 1
                self._depth -= 1
        timed.__wrapped__ = fn  # type: ignore[attr-defined]
        timed.__name__ = getattr(fn, "__name__", "collective")
        return timed


def local_row(doctor: Doctor, rank: int) -> RankRow:
    """This rank's loop over its steady state (the window of the report's rates)."""
    steps = doctor.steps
    skip = doctor.probe.warmup_batches() if doctor.probe is not None else 1
    mask = steady_mask([s.epoch for s in steps], skip)
    kept = [i for i, keep in enumerate(mask) if keep] or list(range(len(steps)))
    n = len(kept)
    coll = doctor.collective_s if len(doctor.collective_s) == len(steps) and doctor.collectives.calls else None
    wait = sum(steps[i].wait_s for i in kept) / n if n else 0.0
    step = sum(steps[i].step_s for i in kept) / n if n else 0.0
    cpu = sum(steps[i].step_cpu_s for i in kept) / n if n else 0.0
    samples = sum(steps[i].samples for i in kept)
    c = sum(coll[i] for i in kept) / n if coll is not None and n else None
    wall = (wait + step) * n
    return RankRow(rank=rank, host=socket.gethostname(), pid=os.getpid(), steps=len(steps),
                   samples=sum(s.samples for s in steps), wait_mean_s=wait, step_mean_s=step,
                   collective_mean_s=c, own_mean_s=wait + (step - c if c is not None else cpu),
                   step_cpu_mean_s=cpu, samples_per_s=samples / wall if wall > 0 else None,
                   starvation=wait / (wait + step) if wait + step > 0 else None)


def gather(doctor: Doctor) -> Optional[Ranks]:
    """Every rank's RankRow, on every rank (all_gather_object over the
    default group: gloo or NCCL), and the slowest named; None outside
    torch.distributed. Every rank must call it (Doctor.report does)."""
    dist = distributed()
    if dist is None:
        return None
    rank, world = dist.get_rank(), dist.get_world_size()
    rows: list[Any] = [None] * world
    dist.all_gather_object(rows, local_row(doctor, rank).to_json())
    table = sorted((RankRow.from_json(r) for r in rows), key=lambda r: r.rank)
    timed = all(r.collective_mean_s is not None for r in table)
    if not timed:  # the same measure on every rank: wait + step CPU time
        for r in table:
            r.own_mean_s = r.wait_mean_s + r.step_cpu_mean_s
    slowest = max(table, key=lambda r: r.own_mean_s).rank
    return Ranks(world_size=world, backend=str(dist.get_backend()), slowest=slowest, collectives_timed=timed,
                 list=table)

