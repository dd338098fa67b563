"""The rules about what happens inside the step (the report's "step"
section: Doctor(profile_steps=N) or a saved torch.profiler trace): host-device
syncs named by the user's file and line, a Python-bound step, a launch-bound
device, pageable copies, no mixed precision on a tensor-core GPU.

Predictions: a fix shortens the profiled step (step_mean_s) by a part of
it; the loop's rate grows by the same factor, capped by the loader's
capacity when it is known. Without a loop (trace mode) the gain is given
per step (predicted_speedup, no samples/s). Time under the profiler is
slower than without it, Python more so than ops, so every prediction here
is a ratio of profiled times; the Python-bound one is a floor (fusing
the ops, as its fixes do, removes their fixed costs too)."""
from __future__ import annotations

from typing import Any, Optional

from .common import (
    DEVICE_IDLE,
    MANY_KERNELS,
    MANY_OPS,
    PYTHON_BOUND,
    SIGNIFICANT,
    TINY_OP,
    Ev,
    Finding,
    _finding,
    _ms,
    _pct,
    current_rate,
)
from .registry import model, rule

_FIX = {
    "item": "read the value every N steps instead (keep a running total on the device: total += loss.detach(); "
            "call total.item() every 50 steps)",
    "print": "print every N steps, and print a number read every N steps rather than the tensor each step",
    "tolist": "convert every N steps, or keep the values on the device",
    "cpu": "copy to the host every N steps, or keep the values on the device",
    "numpy": "convert every N steps, or keep the values on the device",
    "nonzero": "keep shapes static: torch.where or a mask multiply instead of nonzero / boolean indexing",
    "bool": "avoid Python control flow on a tensor's value (if loss > x) inside the step",
}
_WHAT = {"item": ".item()", "print": "printing a tensor", "tolist": ".tolist()", "cpu": ".cpu()",
         "numpy": ".numpy()", "nonzero": "a data-dependent shape (nonzero, boolean indexing)",
         "bool": "a tensor used as a Python bool"}


@model("step")
class StepModel:
    """The profiled step: its time, and the loop's rate to scale."""

    def __init__(self, ev: Ev) -> None:
        self.step = ev["step"]
        self.step_s: float = self.step["step_mean_s"]
        self.loop = bool((ev.get("loop") or {}).get("steps"))
        self.rate = current_rate(ev) if self.loop else 0.0
        cap = ((ev.get("capacity") or {}).get("loader_samples_per_s") or {}).get("value")
        self.loader_cap: Optional[float] = cap

    def predict(self, ev: Ev, saved_s: float, fid: str, title: str, summary: str, fix: str,
                evidence: dict[str, Any], remedy: str = "removes_work",
                severity: Optional[str] = None) -> Finding:
        """A finding whose fix saves `saved_s` of the profiled step."""
        new = max(self.step_s - saved_s, 1e-9)
        speedup = self.step_s / new if saved_s > 0 else None
        if self.loop and speedup:
            pred = self.rate * speedup
            if self.loader_cap:
                pred = min(pred, self.loader_cap)
            return _finding(fid, title, summary, fix, evidence, pred, self.rate, remedy, severity)
        f = _finding(fid, title, summary, fix, evidence, None, None, remedy, severity)
        if speedup:  # trace mode: per step
            f["predicted_speedup"] = round(speedup, 3)
            if severity is None:
                f["severity"] = "high" if speedup >= 1.5 else "medium" if speedup >= SIGNIFICANT else "low"
        return f


def _where(site: dict[str, Any]) -> str:
    """file:line, or where the enclosing function starts when the profile
    only names functions (a Kineto trace's stacks), or that there is no stack."""
    if not site.get("file"):
        return "an unknown line (no Python stack: profile with with_stack=True)"
    if site.get("exact_line", True):
        return f"{site['file']}:{site['line']}"
    return f"{site.get('function') or '?'} ({site['file']}:{site['line']}, where the function starts)"


@rule("step")
def _syncs(ev: Ev, m: StepModel) -> Optional[Finding]:
    """The site that syncs in the most steps (one finding each for the
    others would drown the report; the evidence lists them all)."""
    syncs = m.step.get("syncs") or []
    if not syncs:
        return None
    s = syncs[0]
    n = m.step["steps"]
    every = "every step" if s["steps_with"] >= n else f"in {s['steps_with']} of {n} profiled steps"
    cuda = m.step.get("cuda")
    # On a GPU the time inside the syncing op is the host waiting for the
    # device: without the sync, the host queues the next step meanwhile.
    saved = s["per_step_s"] if cuda else 0.0
    cost = (f"the host waits {_ms(s['per_step_s'])} per step there for the device to catch up" if cuda else
            f"on this CPU-only run it costs {_ms(s['per_step_s'])} per step; on a GPU each one stalls the host "
            "until the device has finished all the work queued before it, so the next step cannot be queued ahead")
    more = f" ({len(syncs) - 1} more site(s) in the evidence)" if len(syncs) > 1 else ""
    return m.predict(
        ev, saved, "host_sync", f"{_WHAT[s['kind']]} at {_where(s)} forces a host-device sync {every}",
        f"{s['op']} at {_where(s)} ran {s['calls']} time(s) in {n} profiled "
        f"step(s): {cost}{more}.",
        _FIX[s["kind"]][0].upper() + _FIX[s["kind"]][1:] + ".",
        {"syncs": syncs, "profiled_steps": n}, severity=None if cuda else "medium")


@rule("step")
def _python_bound(ev: Ev, m: StepModel) -> Optional[Finding]:
    st = m.step
    share, ops = st["python_share"], st["ops_per_step"]
    op_mean = st.get("op_mean_s") or 0.0
    # Many ops, and either most of the step between them or each one tiny
    # (its fixed dispatch cost, which compiling removes too, dominates it).
    if ops < MANY_OPS or (share < PYTHON_BOUND and op_mean >= TINY_OP):
        return None
    tiny = op_mean < TINY_OP
    title = (f"The step is Python-bound: {ops:.0f} tiny ops per step ({_ms(op_mean)} each, mostly dispatch), "
             f"{_pct(share)} outside ops" if tiny and share < PYTHON_BOUND else
             f"The step is Python-bound: {_pct(share)} outside ops, {ops:.0f} ops per step")
    return m.predict(
        ev, m.step_s - st["ops_mean_s"], "python_bound", title,
        f"Each step runs {ops:.0f} top-level ops averaging {_ms(op_mean)}; {_pct(share)} of the step "
        f"({_ms(m.step_s * share)} of {_ms(m.step_s)} under the profiler) is spent in Python between them "
        f"({st['window']}). The prediction keeps the ops as they are and removes every moment between them; a fix "
        "that fuses ops (a vectorised loop, torch.compile) also removes each op's fixed cost, so it can gain far "
        "more: read it as a floor.",
        "torch.compile(model) (or the whole step function) to fuse the small ops; on CUDA, CUDA graphs "
        "(torch.compile(mode=\"reduce-overhead\") or torch.cuda.graphs); fewer, larger ops (vectorise Python "
        "loops over tensors).",
        {"python_share": share, "ops_per_step": ops, "op_mean_s": op_mean, "step_s": m.step_s,
         "ops_s": st["ops_mean_s"],
         "assumes": "a floor: all time outside ops removed, the ops unchanged (fusing them gains more)"})


@rule("step")
def _launch_bound(ev: Ev, m: StepModel) -> Optional[Finding]:
    dev = m.step.get("device")
    if not dev or dev["busy_share"] >= DEVICE_IDLE or dev["kernels_per_step"] < MANY_KERNELS:
        return None
    idle_per_step = dev["idle_s"] / max(1, m.step["steps"])
    return m.predict(
        ev, idle_per_step, "launch_bound",
        f"The device is idle {_pct(1 - dev['busy_share'])} of the step: launch-bound",
        f"{dev['kernels_per_step']:.0f} kernels per step averaging {_ms(dev['kernel_mean_s'] or 0)}, with "
        f"{dev['gaps']} idle gaps between them over {m.step['steps']} step(s): the host cannot queue work as fast "
        "as the device runs it. The prediction is an upper bound (every gap closed).",
        "CUDA graphs (torch.compile(mode=\"reduce-overhead\"), or torch.cuda.graphs), torch.compile to fuse "
        "kernels, a larger batch per step.",
        {**dev, "assumes": "upper bound: every idle gap closed"})


@rule("step")
def _pageable_copies(ev: Ev, m: StepModel) -> Optional[Finding]:
    pageable = [c for c in m.step.get("copies") or [] if c["direction"] == "h2d" and c["memory"] == "pageable"]
    if not pageable:
        return None
    per_step = sum(c["per_step_s"] for c in pageable)
    sites = ", ".join(_where(c) for c in pageable[:3])
    return m.predict(
        ev, per_step, "pageable_copies", "Host-to-device copies from pageable memory",
        f"{sum(c['calls'] for c in pageable)} copies from pageable memory in {m.step['steps']} step(s) "
        f"({_ms(per_step)} of device copy time per step) at {sites}: they go through a staging buffer and "
        "block the host, so they cannot overlap the step. The prediction assumes pinned copies overlap fully.",
        "DataLoader(..., pin_memory=True) and batch.to('cuda', non_blocking=True) (or feedline.Loader, whose "
        "batches are pinned).",
        {"copies": pageable, "per_step_s": per_step, "assumes": "pinned, non-blocking copies overlap the step"})


@rule("step")
def _no_mixed_precision(ev: Ev, m: StepModel) -> Optional[Finding]:
    st = m.step
    dtypes = st.get("matmul_dtypes") or []
    if not st.get("cuda") or not st.get("tensor_cores") or not dtypes:
        return None
    if any(k in d.lower() for d in dtypes for k in ("half", "bfloat16", "float16", "bf16", "fp16")):
        return None
    return _finding(
        "no_mixed_precision", "No mixed precision on a tensor-core GPU",
        f"The matmuls and convolutions run in {', '.join(dtypes)}: the GPU's tensor cores, several times faster, "
        "stay unused.",
        "with torch.autocast('cuda', dtype=torch.bfloat16): around the forward pass (torch.cuda.amp.GradScaler "
        "with float16), or torch.backends.cuda.matmul.allow_tf32 = True.",
        {"matmul_dtypes": dtypes, "tensor_cores": True}, None, None, remedy="removes_work", severity="medium")
