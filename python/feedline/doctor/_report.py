"""The report: evidence assembled from a Doctor, the findings from rules/,
and its renderings (terminal summary, JSON, trace, HTML).

The JSON schema is evidence.py's records, documented in docs/doctor.md; SCHEMA_VERSION changes
whenever a field is removed or changes meaning (adding fields does not).
validate() checks a dict against it and is what the tests use.
"""
from __future__ import annotations

import json
import os
import platform
import time
from typing import TYPE_CHECKING, Any, Iterable, Optional, Union

from . import rules
from .evidence import (
    ABSENT,
    TIMELINE_COLUMNS,
    Capacity,
    Epoch,
    Evidence,
    LoaderInfo,
    Loop,
    Machine,
    Stage,
    Timeline,
    steady_mask,
)
from .step_profile import anatomy, trace_events

STEP_PID = 3  # the trace's process of the profiled steps (trace.py has 1 and 2)

if TYPE_CHECKING:
    from .watch import Doctor

SCHEMA = "feedline.doctor.report"
SCHEMA_VERSION = 1

Span = tuple[str, str, str, float, float]  # (lane, name, category, start_s, dur_s)


def available_cores() -> int:
    """The cores this process may use, counted as the engine counts them:
    the affinity mask, capped by the cgroup's CPU quota."""
    from .. import _C
    return int(_C.available_cores())


def machine_info(cores: Optional[int] = None) -> Machine:
    info = Machine(cores=cores or available_cores(), cpu=platform.processor() or platform.machine())
    try:
        with open("/proc/meminfo") as f:
            kb = {ln.split(":")[0]: int(ln.split()[1]) for ln in f
                  if len(ln.split()) >= 2 and ln.split()[1].isdigit()}
        info.mem_total_bytes = kb.get("MemTotal", 0) * 1024
        info.mem_available_bytes = kb.get("MemAvailable", 0) * 1024
    except OSError:
        pass
    try:
        import torch
        if torch.cuda.is_available():
            info.cuda = True
            info.gpu = torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001 - no torch, or a broken CUDA: the machine has no GPU for us
        pass
    return info


def _loop_section(doctor: Doctor, skip: int = 1) -> Loop:
    steps = doctor.steps
    n = len(steps)
    wait = sum(s.wait_s for s in steps)
    step = sum(s.step_s for s in steps)
    samples = sum(s.samples for s in steps)
    wall = wait + step
    # Steady state: every step but each epoch's warm-up (evidence.warmup_steps).
    mask = steady_mask([s.epoch for s in steps], skip)
    steady = [s for s, keep in zip(steps, mask) if keep]
    st_wall = sum(s.wait_s + s.step_s for s in steady)
    st_wait = sum(s.wait_s for s in steady)
    st_samples = sum(s.samples for s in steady)
    epochs = []
    for e in doctor.epochs:
        end = e["t_end"] if e["t_end"] is not None else time.perf_counter()
        epochs.append(Epoch(index=e["index"], steps=e["steps"], samples=e["samples"], wall_s=end - e["t_iter"],
                            first_batch_s=e["first_batch_s"]))
    return Loop(
        steps=n, samples=samples, epochs=len(doctor.epochs), wall_s=wall, wait_s=wait,
        step_s=step, starvation=wait / wall if wall > 0 else 0.0,
        samples_per_s=samples / wall if wall > 0 else 0.0,
        steady_samples_per_s=st_samples / st_wall if st_wall > 0 else None,
        steady_starvation=st_wait / st_wall if st_wall > 0 else None,
        wait_mean_s=wait / n if n else 0.0, step_mean_s=step / n if n else 0.0,
        step_cpu_mean_s=sum(s.step_cpu_s for s in steps) / n if n else 0.0,
        receive_cpu_mean_s=sum(s.receive_cpu_s for s in steps) / n if n else 0.0,
        process_cpu_mean_s=sum(s.process_cpu_s for s in steps) / n if n else 0.0,
        device=doctor.device_summary(skip),
        epoch_list=epochs,
        steady_steps=len(steady),
        steady_window=_steady_window(mask, [s.epoch for s in steps]),
        steady_step_mean_s=sum(s.step_s for s in steady) / len(steady) if steady else None,
        site=doctor.loop_site if doctor.loop_site is not None else ABSENT,
    )


def _steady_window(mask: list[bool], epochs: list[int]) -> Optional[str]:
    """The steady-state steps in words (1-based, as a user counts steps)."""
    kept = [i + 1 for i, keep in enumerate(mask) if keep]
    if not kept:
        return None
    if len(set(epochs)) == 1 or kept == list(range(kept[0], kept[-1] + 1)):
        return f"steps {kept[0]}-{kept[-1]}"
    left = len(mask) - len(kept)
    return f"{len(kept)} steps: each epoch's warm-up left out ({left} steps)"


def _stages(ev: Evidence) -> list[Stage]:
    """Time per stage, per batch, for the plots and the summary."""
    out = []
    t = ev.torch
    loop = ev.loop
    if t:
        B = t.samples_per_batch
        where = "worker" if ev.loader.settings.get("num_workers") else "main"
        out.append(Stage("load (read+decode)", where, B * t.load.wall_s, B * t.load.cpu_s, B * t.load.blocked_s))
        for tf in t.transforms:
            out.append(Stage(tf.name, where, B * tf.wall_s, B * tf.cpu_s))
        b = t.batch
        out.append(Stage("collate", where, b.collate_s, b.collate_cpu_s))
        if b.pin_s:
            out.append(Stage("pin memory", "pin_thread", b.pin_s))
        if b.receive_s is not None:
            out.append(Stage("receive", "main", b.receive_s))
    f = ev.feedline
    if f:
        B = ev.loader.batch_size or 1
        for op in f.ops:
            out.append(Stage(op.name, "python" if op.python else "engine", B * op.per_item_s))
    if loop and loop.steps:
        # The steady state's step, the window of the capacity and the findings.
        out.append(Stage("step", "main", loop.steady_step_mean_s or loop.step_mean_s, loop.step_cpu_mean_s))
    return out


def build_evidence(doctor: Doctor) -> Evidence:
    """Everything a Doctor measured, through its public attributes and its
    probe (watch.Probe)."""
    probe = doctor.probe
    kind = probe.kind if probe is not None else "iterable"
    settings = probe.settings() if probe is not None else {}
    loop = _loop_section(doctor, probe.warmup_batches() if probe is not None else 1)
    ev = Evidence(schema=SCHEMA, schema_version=SCHEMA_VERSION, mode="loop", created_unix=time.time(),
                  machine=machine_info(doctor.cores),
                  loader=LoaderInfo(kind=kind,
                                    type=type(doctor.iterable).__name__ if doctor.iterable is not None else None,
                                    batch_size=settings.get("batch_size"), settings=settings),
                  loop=loop, torch=None, feedline=None)
    if probe is not None:
        probe.add_evidence(ev, doctor)
    ev.machine.other_cpu_cores = _other_cpu(doctor, ev)
    ev.stages = _stages(ev)
    ev.capacity = Capacity.from_json(rules.capacity(ev.to_json(), doctor.capacity))
    t0 = doctor.t0 or 0.0
    ev.timeline = Timeline(columns=list(TIMELINE_COLUMNS),
                           rows=[[round(s.t_request - t0, 6), round(s.wait_s, 6), round(s.step_s, 6), s.samples,
                                  s.epoch] for s in doctor.steps])
    ev.probes = probe.status() if probe is not None else None
    wi = doctor.what_if()
    if wi is not None:
        ev.what_if = wi
    if doctor.ranks is not None:
        ev.ranks = doctor.ranks
    from .tokens import section as token_section
    tokens = token_section(doctor, probe.warmup_batches() if probe is not None else 1)
    if tokens is not None:
        ev.tokens = tokens
    prof = doctor.step_profiler.profile
    if prof is not None:
        step = anatomy(prof, "profile")
        if step is not None:
            ev.step = step
    return ev


def step_trace_events(doctor: Doctor) -> list[dict[str, Any]]:
    """The profiled steps as trace events (process 3), placed on the doctor's clock."""
    sp = doctor.step_profiler
    if sp.profile is None or not sp.profile.windows or sp.t_first is None or doctor.t0 is None:
        return []
    offset = (sp.t_first - doctor.t0) * 1e6 - sp.profile.windows[0][0]
    return trace_events(sp.profile, STEP_PID, offset)


def _other_cpu(doctor: Doctor, ev: Evidence) -> Optional[float]:
    """Cores kept busy by other processes while the loop ran: the machine's
    busy time minus the training process's and its workers' CPU time."""
    w = doctor.cpu_window
    if not w or w[1] is None:
        return None
    start, end = w[0], w[1]
    if start is None or start.system_busy_s is None or end.system_busy_s is None:
        return None
    wall = end.wall - start.wall
    if wall < 0.2:  # /proc/stat counts in 10 ms ticks
        return None
    ours = end.process_cpu_s - start.process_cpu_s
    t = ev.torch
    if t and ev.loader.settings.get("num_workers"):
        b = t.batch
        per_batch = t.samples_per_batch * t.sample.cpu_s + b.collate_cpu_s + (b.worker_hidden_cpu_s or 0)
        ours += per_batch * (end.steps - start.steps)
    return max(0.0, (end.system_busy_s - start.system_busy_s - ours) / wall)


class Report:
    """A diagnosis: `data` is the JSON document (docs/doctor.md)."""

    def __init__(self, data: dict[str, Any], spans: Iterable[Span] = (), events: Iterable[dict[str, Any]] = ()) -> None:
        self.data = data
        self.spans = list(spans)
        self.events = list(events)  # more trace events, in the trace's own form (the profiled steps)

    @classmethod
    def from_doctor(cls, doctor: Doctor) -> Report:
        ev = doctor.evidence()
        ev["findings"] = rules.diagnose(ev)
        probe = doctor.probe
        spans = probe.spans(doctor.t0) if probe is not None and doctor.t0 is not None else []
        return cls(ev, spans, step_trace_events(doctor))

    @classmethod
    def from_json(cls, path_or_dict: Union[str, dict[str, Any]], rediagnose: bool = False) -> Report:
        if isinstance(path_or_dict, dict):
            data = path_or_dict
        else:
            with open(path_or_dict) as f:
                data = json.load(f)
        if rediagnose and data.get("mode") == "loop":
            data["findings"] = rules.diagnose(data)
        elif rediagnose and data.get("mode") == "trace":
            data["findings"] = rules.diagnose_trace(data)
        return cls(data)

    @property
    def findings(self) -> list[dict[str, Any]]:
        return self.data.get("findings", [])

    @property
    def top(self) -> Optional[dict[str, Any]]:
        return self.findings[0] if self.findings else None

    def to_json(self, indent: Optional[int] = 1) -> str:
        return json.dumps(self.data, indent=indent, default=_jsonable)

    def save_json(self, path: Any) -> None:
        with open(path, "w") as f:
            f.write(self.to_json())

    def trace(self) -> dict[str, Any]:
        from .trace import chrome_trace
        return chrome_trace(self.data, self.spans, self.events)

    def save_trace(self, path: Any) -> None:
        with open(path, "w") as f:
            json.dump(self.trace(), f)

    def html(self) -> str:
        from .html import render
        return render(self.data)

    def save_html(self, path: Any) -> None:
        with open(path, "w") as f:
            f.write(self.html())

    def summary(self) -> str:
        from .summary import text
        return text(self.data)

    __str__ = summary


def _jsonable(x: Any) -> Any:
    if hasattr(x, "item"):
        return x.item()
    if isinstance(x, (set, tuple)):
        return list(x)
    return str(x)


# -- schema ------------------------------------------------------------------------
_NUM = (int, float)
_REQUIRED: dict[str, dict[str, Any]] = {
    "": {"schema": str, "schema_version": int, "mode": str, "created_unix": _NUM, "machine": dict,
         "loader": dict, "findings": list},
    "machine": {"cores": int, "cuda": bool},
    "loader": {"kind": str, "settings": dict},
    "loop": {"steps": int, "samples": int, "epochs": int, "wall_s": _NUM, "wait_s": _NUM, "step_s": _NUM,
             "starvation": _NUM, "samples_per_s": _NUM, "wait_mean_s": _NUM, "step_mean_s": _NUM,
             "epoch_list": list},
    "capacity": {"loader_samples_per_s": dict, "step_samples_per_s": dict},
    "timeline": {"columns": list, "rows": list},
    "finding": {"rank": int, "id": str, "title": str, "severity": str, "summary": str, "fix": str,
                "evidence": dict, "predicted_samples_per_s": (type(None),) + _NUM,
                "predicted_speedup": (type(None),) + _NUM},
}
SEVERITIES = ("high", "medium", "low", "info")


def validate(data: dict[str, Any]) -> bool:
    """Raises ValueError naming the first field that breaks the schema."""
    def need(obj: dict[str, Any], section: str, where: str) -> None:
        for key, typ in _REQUIRED[section].items():
            if key not in obj:
                raise ValueError(f"{where}: missing '{key}'")
            if not isinstance(obj[key], typ) or (typ is int and isinstance(obj[key], bool)):
                raise ValueError(f"{where}.{key}: {type(obj[key]).__name__} is not {typ}")
    need(data, "", "report")
    if data["schema"] != SCHEMA:
        raise ValueError(f"report.schema: {data['schema']!r} is not {SCHEMA!r}")
    if data["schema_version"] != SCHEMA_VERSION:
        raise ValueError(f"report.schema_version: {data['schema_version']} (this build reads {SCHEMA_VERSION})")
    if data["mode"] not in ("loop", "pipeline", "trace"):
        raise ValueError(f"report.mode: {data['mode']!r}")
    need(data["machine"], "machine", "report.machine")
    need(data["loader"], "loader", "report.loader")
    if data["loader"]["kind"] not in ("torch", "feedline", "iterable", "none"):
        raise ValueError(f"report.loader.kind: {data['loader']['kind']!r}")
    if data["mode"] == "trace":
        for section in ("trace", "step"):
            if not isinstance(data.get(section), dict):
                raise ValueError(f"report: a trace report needs '{section}'")
    elif data["mode"] == "loop":
        for section in ("loop", "capacity", "timeline"):
            if not isinstance(data.get(section), dict):
                raise ValueError(f"report: missing '{section}'")
            need(data[section], section, f"report.{section}")
        cols = data["timeline"]["columns"]
        for i, row in enumerate(data["timeline"]["rows"]):
            if len(row) != len(cols) or not all(isinstance(v, _NUM) for v in row):
                raise ValueError(f"report.timeline.rows[{i}]: {row!r}")
        if not 0.0 <= data["loop"]["starvation"] <= 1.0:
            raise ValueError("report.loop.starvation: outside [0, 1]")
    else:
        if not isinstance(data.get("scan"), list) or not data["scan"]:
            raise ValueError("report: a pipeline report needs a non-empty 'scan'")
        for i, s in enumerate(data["scan"]):
            for key in ("threads", "samples_per_s", "stages"):
                if key not in s:
                    raise ValueError(f"report.scan[{i}]: missing '{key}'")
    for i, f in enumerate(data["findings"]):
        need(f, "finding", f"report.findings[{i}]")
        if f["rank"] != i + 1:
            raise ValueError(f"report.findings[{i}].rank: {f['rank']} (expected {i + 1})")
        if f["severity"] not in SEVERITIES:
            raise ValueError(f"report.findings[{i}].severity: {f['severity']!r}")
    json.dumps(data, default=_jsonable)  # serialisable
    return True


def trace_report(path: str) -> Report:
    """The step findings of a torch.profiler trace file (export_chrome_trace),
    read offline. Raises ValueError naming the file and what is wrong."""
    from .evidence import TraceInfo
    from .step_profile import from_trace
    try:
        with open(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from e
    prof, fmt, n = from_trace(data, path)
    # The trace's folder first: a relative file in its stacks is most often beside it.
    step = anatomy(prof, "trace", source_dirs=(os.path.dirname(os.path.abspath(path)),))
    if step is None:
        raise ValueError(f"{path}: no op inside a step: not a torch.profiler trace of a training loop "
                         "(profile with torch.profiler.profile(...) and prof.export_chrome_trace(path))")
    step.trace_file = str(path)
    ev = Evidence(schema=SCHEMA, schema_version=SCHEMA_VERSION, mode="trace", created_unix=time.time(),
                  machine=Machine(cores=0, cpu="unknown (a trace)", cuda=prof.cuda),
                  loader=LoaderInfo(kind="none"), step=step, trace=TraceInfo(path=str(path), format=fmt, events=n))
    data_out = ev.to_json()
    data_out["findings"] = rules.diagnose_trace(data_out)
    return Report(data_out)
