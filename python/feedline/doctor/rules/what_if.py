"""The rule for what feedline would give (the report's "what_if" section:
feedline.Loader with the translated transform, measured on a sample of the
DataLoader's own files, what_if.py).

Prediction: the measured feedline rate, capped by the step's demand (the
capacity section's step side: a loader faster than the step cannot make
the loop faster than the step). The comparison in the title is against
the DataLoader's own capacity where known (measured or the model's), else
the loop's rate. A what-if is an alternative, not a cause: rules.rank()
lists it after the findings that name a cause."""
from __future__ import annotations

from typing import Optional

from .common import Ev, Finding, _finding, current_rate, rate_window, step_demand


def what_if(ev: Ev) -> Optional[Finding]:
    w = ev.get("what_if")
    if not w or not w.get("ran") or not w.get("samples_per_s"):
        return None
    rate = w["samples_per_s"]
    cap = (ev.get("capacity") or {}).get("loader_samples_per_s") or {}
    ours, src = (cap.get("value"), f"its capacity, {cap.get('source')}") if cap.get("value") else (
        current_rate(ev), f"the loop's rate, {rate_window(ev)}")
    demand = step_demand(ev)
    now = current_rate(ev)
    pred = min(rate, demand) if demand else rate
    capped = bool(demand and demand < rate)
    times = f", {rate / ours:.1f}x your DataLoader's" if ours else ""
    notes = "".join(f" Note: {n}." for n in w.get("notes") or [])
    return _finding(
        "feedline_what_if", f"feedline.Loader on {w['files']} of your files: ~{rate:,.0f} samples/s{times}",
        f"feedline.Loader ({w['transform']}; batch size {w['batch_size']}, {w['threads']} threads) measured "
        f"{w['samples']} samples in {w['seconds']:.1f} s on {w['files']} of the {w['dataset']}'s files, against "
        f"{ours or 0:,.0f} samples/s for the DataLoader ({src})."
        + (f" The step consumes only {demand:,.0f} samples/s, so the loop would reach that, not more."
           if capped else "") + notes,
        "Replace the DataLoader (transform: the Compose you gave the dataset, translated to feedline's native "
        "transform):\n" + w["code"],
        {"feedline_samples_per_s": rate, "dataloader_samples_per_s": ours, "dataloader_source": src,
         "step_samples_per_s": demand, "capped_by_step": capped, "code": w["code"], "files": w["files"]},
        pred if pred > now else now, now, remedy="switch_loader")
