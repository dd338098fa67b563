"""The rules about the loop itself, for any loader kind: the step bounds
it, nothing explains the wait, or the probes could not attach."""
from __future__ import annotations

from typing import Optional

from .common import (
    HEADROOM,
    STARVED,
    Ev,
    Finding,
    _finding,
    _ms,
    _pct,
    _starvation,
    current_rate,
    starvation_window,
    step_demand,
)
from .torch_loader import TorchModel


def _receive_bound(ev: Ev) -> Optional[float]:
    """(torch) The waiting is the training process receiving batches that
    idle workers already made: the receive time per batch, else None."""
    if (ev.get("loader") or {}).get("kind") != "torch" or not ev.get("torch"):
        return None
    m = TorchModel(ev)
    r = m.receive_s
    if m.n == 0 or r is None or m.period()[1] != "main_thread" or m.step_s < 2 * r:
        return None
    return r


def _input_is_fine(ev: Ev) -> bool:
    return _starvation(ev) < STARVED or _receive_bound(ev) is not None


def _step_bound(ev: Ev) -> Optional[Finding]:
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
    src = (cap.get("loader_samples_per_s") or {}).get("source")
    demand = step_demand(ev) or current_rate(ev)
    window = starvation_window(ev)
    if lc and demand and lc < HEADROOM * demand and not receiving:
        return _no_headroom(ev, starv, lc, src, demand)
    head = (f"; the loader can deliver about {lc:.0f} samples/s ({src}), {lc / demand:.1f}x what the step uses"
            if lc and demand else "")
    return _finding(
        "step_bound", "Input is fine: the step is the bottleneck",
        f"The loop waits for data {_pct(starv)} of the time ({window}); the step takes "
        f"{_ms(loop.get('steady_step_mean_s') or loop.get('step_mean_s') or 0)}{head}.{receiving}",
        "Speed up the step itself (mixed precision, a larger batch per step, torch.compile; "
        "Doctor(profile_steps=5) looks inside it); changing the loader will not help.",
        {"starvation": starv, "window": window, "step_s": loop.get("step_mean_s"), "loader_samples_per_s": lc},
        current_rate(ev), current_rate(ev), remedy="none", severity="info")


def _no_headroom(ev: Ev, starv: float, lc: float, src: Optional[str], demand: float) -> Finding:
    """The loop is fed today, but the loader only just keeps up: a busier
    machine, a slower shard or a faster step (the step findings' fixes)
    starves it. A risk, not "input is fine"."""
    kind = (ev.get("loader") or {}).get("kind")
    s = (ev.get("loader") or {}).get("settings") or {}
    if kind == "torch":
        from .torch_loader import TorchModel
        m = TorchModel(ev)
        k = max(m.n + 1, m.best_workers()) if m.n else m.best_workers()
        fix = f"DataLoader(..., num_workers={k}) for headroom, before speeding up the step"
    elif kind == "feedline":
        fix = ("feedline.Loader(..., num_threads=\"auto\") (one thread per core) for headroom"
               if s.get("num_threads") != "auto" else "give the loader more cores (cpu_budget) for headroom")
    else:
        fix = "make the loader faster (more workers or threads) before speeding up the step"
    return _finding(
        "loader_no_headroom", f"No headroom: the loader delivers {lc / demand:.2f}x what the step uses",
        f"The loop waits for data only {_pct(starv)} of the time ({starvation_window(ev)}), but the loader "
        f"delivers about {lc:.0f} samples/s ({src}) against the step's {demand:.0f} samples/s: any slowdown of "
        "the input (a busier machine, slower storage) or speed-up of the step (mixed precision, "
        "torch.compile) makes the loop wait.",
        fix + ".",
        {"loader_samples_per_s": lc, "loader_source": src, "step_samples_per_s": demand,
         "headroom": lc / demand, "needed": HEADROOM, "starvation": starv},
        current_rate(ev), current_rate(ev), remedy="risk", severity="medium")


def _unexplained(ev: Ev) -> Finding:
    starv = _starvation(ev)
    if not (ev.get("loop") or {}).get("steps"):
        return _finding("nothing_measured", "Nothing measured yet",
                        "No step was watched: iterate doctor.watch(loader) in the training loop first.",
                        "for batch in doctor.watch(loader): step(batch)", {}, None, None, remedy="none",
                        severity="info")
    return _finding(
        "unexplained", "Starved, cause not found",
        f"The loop waits for data {_pct(starv)} of the time ({starvation_window(ev)}), but no per-stage "
        "evidence explains it "
        "(an unknown iterable, or a stage the doctor cannot see).",
        "Run doctor.measure_capacity(loader) to measure the loader alone, or use a torch DataLoader or "
        "feedline.Loader, which the doctor can look inside.",
        {"starvation": starv}, None, current_rate(ev), remedy="none", severity="info")


def _probes_not_attached(ev: Ev) -> Optional[Finding]:
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


