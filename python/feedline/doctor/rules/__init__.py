"""Every diagnosis rule of the doctor, and the model behind its predictions.

This is the only package that decides anything. It reads the evidence dict
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

Where things are: registry.py (the @rule / @model registry and run_rules),
common.py (thresholds, wording, the fair share of the cores), one module per
loader kind (torch_loader.py, feedline_loader.py: the model and its rules),
loop.py (rules for any loop), step.py (inside the step: Doctor(profile_steps=N)
or a saved torch.profiler trace) and pipeline.py (the CLI's pipeline alone).
"""
from __future__ import annotations

from typing import Any, Optional

from . import feedline_loader, step, torch_loader  # noqa: F401 - importing them registers their rules
from .common import (
    COLLATE_BYTES_PER_S,
    COPY_ON_READ_BYTES,
    DECODE_FIXED_S,
    DEFAULT_RECEIVE_S,
    FL_IDLE,
    LARGE_BATCH,
    PREFER_CAUSE,
    RECEIVE_BYTES_PER_S,
    SIGNIFICANT,
    STARTUP_SHARE,
    STARVED,
    STEP_BOUND_RANK,
    STORE_MARGIN,
    WAIT_WORKERS_PER_CORE,
    Ev,
    Finding,
    _finding,
    _pct,
    current_rate,
    fair_share_cores,
)
from .feedline_loader import FeedlineModel
from .loop import _input_is_fine, _probes_not_attached, _step_bound, _unexplained
from .pipeline import diagnose_pipeline
from .ranks import straggler as _straggler
from .registry import model_for, rule, rules_for, run_rules
from .torch_loader import TorchModel
from .what_if import what_if as _what_if

__all__ = ["diagnose", "diagnose_trace", "rank", "capacity", "diagnose_pipeline", "current_rate", "fair_share_cores",
           "rule", "rules_for", "run_rules", "model_for", "TorchModel", "FeedlineModel", "STARVED", "SIGNIFICANT",
           "PREFER_CAUSE", "WAIT_WORKERS_PER_CORE", "DEFAULT_RECEIVE_S", "RECEIVE_BYTES_PER_S",
           "COLLATE_BYTES_PER_S", "DECODE_FIXED_S", "STORE_MARGIN", "STEP_BOUND_RANK", "STARTUP_SHARE", "FL_IDLE",
           "COPY_ON_READ_BYTES", "LARGE_BATCH"]


def diagnose(ev: Ev) -> list[Finding]:
    """Ranked findings for a watched loop (mode "loop"): the rules of the
    loader's kind (registry: one module per kind), then the loop's own."""
    kind = (ev.get("loader") or {}).get("kind")
    findings = run_rules(kind, ev) if kind and ev.get(kind) else []
    if ev.get("step"):
        findings.extend(run_rules("step", ev))
    f = _straggler(ev)
    if f:
        findings.append(f)
    f = _step_bound(ev)
    if f:
        findings.append(f)
    if not findings:
        findings.append(_unexplained(ev))
    f = _what_if(ev)  # after "cause not found": an alternative, not the cause
    if f:
        findings.append(f)
    f = _probes_not_attached(ev)
    if f:  # first among equals (it explains why no stage is named)
        findings.insert(0, f)
    return rank(findings)


def diagnose_trace(ev: Ev) -> list[Finding]:
    """Ranked findings for a torch.profiler trace read offline (mode
    "trace"): the step rules alone, or a note that they found nothing."""
    findings = run_rules("step", ev) if ev.get("step") else []
    if not findings:
        st = ev.get("step") or {}
        findings.append(_finding(
            "step_fine", "Nothing inside the step stands out",
            f"Over {st.get('window')}: {_pct(st.get('python_share') or 0)} of the step outside ops, "
            f"{st.get('ops_per_step') or 0:.0f} ops per step, no host-device sync"
            + ("" if st.get("python_stacks") else " found (the trace has no Python stacks: with_stack=True "
               "names the lines)") + ".",
            "", {"window": st.get("window")}, None, None, remedy="none", severity="info"))
    return rank(findings)


# The findings of the step rules (rules/step.py) that predict a shorter step.
STEP_FINDINGS = ("host_sync", "python_bound", "launch_bound", "pageable_copies")


def rank(findings: list[Finding]) -> list[Finding]:
    """Orders findings: imminent memory exhaustion first, then by predicted
    speedup, a fix that removes work before one that adds processes when both
    predict about the same. "Input is fine" (step_bound) ranks as a 1.5x
    gain: above any small input-side fix, below a big one that the steady
    state does not show (worker start-up every epoch). What feedline would
    give (switch_loader) comes after every finding that names a cause.

    When the step bounds the loop, a finding from inside the step that
    predicts a gain (a Python-bound step, launch gaps, pageable copies)
    names what "input is fine" only points at, so it ranks right above it
    whatever its own prediction (the Python-bound one is a floor: a step of
    hundreds of tiny ops gains far more from fusing than the time between
    them, issue 40)."""
    step_bound = any(f["id"] == "step_bound" for f in findings)

    def key(f: Finding) -> tuple[int, float, int]:
        top = f["id"] == "memory_pressure" and f["severity"] == "high"
        speed = f.get("predicted_speedup") or 1.0
        if f["id"] == "step_bound":
            speed = STEP_BOUND_RANK
        elif step_bound and f["id"] in STEP_FINDINGS and speed > 1.0:
            speed = max(speed, STEP_BOUND_RANK)
        if f.get("remedy") == "parallelism":
            speed *= PREFER_CAUSE
        return (0 if top else 2 if f.get("remedy") == "switch_loader" else 1, -speed,
                1 if f["id"] == "step_bound" else 0)
    out = sorted(findings, key=key)
    for i, f in enumerate(out):
        f["rank"] = i + 1
    return out



# -- capacity vs demand ---------------------------------------------------------------
def capacity(ev: Ev, measured: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """Loader capacity and step capacity in samples/s: measured where
    measure_capacity ran, else from the model (loader) or the loop's own step
    times (step); which side bounds the loop; and the model's rate for the
    current settings with its error against the measured rate."""
    measured = measured or {}
    loop = ev.get("loop") or {}
    kind = (ev.get("loader") or {}).get("kind")
    out: dict[str, Any] = {"loop_samples_per_s": current_rate(ev), "bound": None, "model_samples_per_s": None,
                           "model_error": None}
    model_loader = None
    make = model_for(kind) if kind and ev.get(kind) else None
    rates = make(ev).capacity_rates() if make is not None else None
    if rates is not None:  # the model's (loader alone, the loop) for the current settings
        model_loader, out["model_samples_per_s"] = rates
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
    elif loop.get("steady_step_mean_s") or loop.get("step_mean_s"):  # the window of the loop's rate
        out["step_samples_per_s"] = {"value": per_step / (loop.get("steady_step_mean_s") or loop["step_mean_s"]),
                                     "source": "loop"}
    else:
        out["step_samples_per_s"] = {"value": None, "source": None}
    if loop.get("steps"):
        out["bound"] = "step" if _input_is_fine(ev) else "loader"
    return out
