"""What every rule shares: the thresholds, how a finding is made and worded,
the loop's starvation and measured rate, and the fair share of the cores.

Evidence here is the report's JSON form (evidence.py's records, to_json()),
so that a saved report can be re-diagnosed."""
from __future__ import annotations

from typing import Any, Optional

Ev = dict[str, Any]        # evidence: the report's JSON minus its findings
Finding = dict[str, Any]   # one finding (docs/doctor.md "Findings")

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
PYTHON_OPS_DOMINATE = 0.5  # Python ops holding the GIL for more of a sample's work: threads cannot scale it
FL_IDLE = 0.5               # feedline threads idle above this share of their time do not bound the loop
COPY_ON_READ_BYTES = 64 << 20
LARGE_BATCH = 64
HEADROOM = 1.2          # a loader delivering less than this many times the step's demand has no headroom
PYTHON_BOUND = 0.5      # share of the step outside ops above which, with many ops, it is Python-bound
MANY_OPS = 100          # top-level ops per step that make a step "many tiny ops"
TINY_OP = 20e-6         # ... each this short on average (under the profiler): per-op overhead dominates
DEVICE_IDLE = 0.5       # device busy less than this share of the step, with many kernels: launch-bound
MANY_KERNELS = 50


def fair_share_cores(cores: int, other_cores: float, threads: int) -> float:
    """The cores our `threads` runnable threads can count on: those other
    processes leave free, but at least our fair share, since the scheduler
    shares the cores by runnable thread."""
    return max(cores - other_cores, cores * threads / (threads + other_cores))


def other_cores(ev: Ev, cores: int) -> float:
    """Cores other processes kept busy while the loop ran (at most all but one)."""
    return min(cores - 1.0, ev["machine"].get("other_cpu_cores") or 0.0)


def _finding(fid: str, title: str, summary: str, fix: str, evidence: dict[str, Any], predicted: Optional[float],
             current: Optional[float], remedy: str = "removes_work", severity: Optional[str] = None) -> Finding:
    speedup = predicted / current if predicted and current else None
    if severity is None:
        severity = "high" if speedup and speedup >= 1.5 else "medium" if speedup and speedup >= SIGNIFICANT else "low"
    return {"id": fid, "title": title, "severity": severity, "summary": summary, "fix": fix,
            "evidence": evidence, "remedy": remedy,
            "predicted_samples_per_s": round(predicted, 3) if predicted else None,
            "predicted_speedup": round(speedup, 3) if speedup else None}


def _ms(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s >= 1e-3 or s == 0 else f"{s * 1e6:.0f} us"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _starvation(ev: Ev) -> float:
    """The share of time the loop waits for data, in steady state (epoch
    start-ups are the persistent_workers rule's business); on the device's
    clock when CUDA events timed it."""
    loop = ev.get("loop") or {}
    dev = loop.get("device")
    if dev and dev.get("starvation") is not None:
        return float(dev["starvation"])
    if loop.get("steady_starvation") is not None:
        return float(loop["steady_starvation"])
    return float(loop.get("starvation") or 0.0)


def steady_label(ev: Ev) -> str:
    """The steady-state window in words: "steady state, steps 4-200"."""
    w = (ev.get("loop") or {}).get("steady_window")
    return f"steady state, {w}" if w else "steady state"


def whole_label(ev: Ev) -> str:
    loop = ev.get("loop") or {}
    return f"whole run, {loop.get('steps', 0)} steps"


def rate_window(ev: Ev) -> str:
    """The window of current_rate(ev), named wherever that rate is shown."""
    loop = ev.get("loop") or {}
    return steady_label(ev) if loop.get("steady_samples_per_s") else whole_label(ev)


def starvation_window(ev: Ev) -> str:
    """The window (and clock) of _starvation(ev), named wherever it is shown."""
    loop = ev.get("loop") or {}
    dev = loop.get("device")
    if dev and dev.get("starvation") is not None:
        return f"device clock, {steady_label(ev)}"
    return steady_label(ev) if loop.get("steady_starvation") is not None else whole_label(ev)


def step_demand(ev: Ev) -> Optional[float]:
    """Samples/s the step alone consumes (the capacity section's step side)."""
    return ((ev.get("capacity") or {}).get("step_samples_per_s") or {}).get("value")


def current_rate(ev: Ev) -> float:
    """The measured rate predictions are compared with: steady state
    (epoch start-ups excluded) when known."""
    loop = ev.get("loop") or {}
    return float(loop.get("steady_samples_per_s") or loop.get("samples_per_s") or 0.0)




def _loader_bound(ev: Ev) -> bool:
    return _starvation(ev) >= STARVED
