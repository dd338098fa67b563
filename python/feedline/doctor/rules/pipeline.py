"""The rules for the pipeline measured alone (the CLI)."""
from __future__ import annotations

import math
from typing import Any, Optional

from .common import Ev, Finding, _finding, _ms, _pct


def diagnose_pipeline(ev: Ev, target_rate: Optional[float] = None) -> tuple[list[Finding], dict[str, Any]]:
    """Findings for `python3 -m feedline.doctor DATA`: the pipeline measured
    alone at several thread counts (ev["scan"]). Returns (findings, summary)
    where summary holds the bottleneck, best rate, per-core rate and the
    answer for target_rate. Findings come in a fixed order: the answer for
    the target rate (the question asked), the bottleneck, poor scaling."""
    scan = [s for s in ev.get("scan", []) if s.get("samples_per_s")]
    if not scan:
        return [], {}
    cores = max(1, int(ev["machine"].get("cores") or 1))
    best = max(scan, key=lambda s: s["samples_per_s"])
    one = min(scan, key=lambda s: s["threads"])
    per_core = one["samples_per_s"] / min(one["threads"], cores)
    stages = best.get("stages") or []
    total = sum(s["per_sample_s"] for s in stages) or 1e-12
    top = max(stages, key=lambda s: s["per_sample_s"]) if stages else None
    eff = {s["threads"]: s["samples_per_s"] / (per_core * min(s["threads"], cores)) for s in scan}
    summary = {"best_threads": best["threads"], "best_samples_per_s": best["samples_per_s"],
               "per_core_samples_per_s": per_core, "bottleneck": top["name"] if top else None,
               "bottleneck_share": top["per_sample_s"] / total if top else None, "efficiency": eff}
    findings = []
    if top:
        findings.append(_finding(
            "pipeline_bottleneck", f"Bottleneck stage: {top['name']}",
            f"{top['name']} takes {_ms(top['per_sample_s'])} of the {_ms(total)} each sample costs a thread "
            f"({_pct(top['per_sample_s'] / total)}).",
            "Reads: pack into shards or raise read_ahead_bytes. Decode/transform: store smaller images, use "
            "uint8 output and normalise on the GPU, or add cores.",
            {"stage": top["name"], "per_sample_s": top["per_sample_s"], "share": top["per_sample_s"] / total},
            None, None, remedy="none", severity="info"))
    worst = min(((t, e) for t, e in eff.items() if min(t, cores) > 1), key=lambda x: x[1], default=None)
    if worst and worst[1] < 0.7:
        findings.append(_finding(
            "poor_scaling", f"Scaling stops early: {_pct(worst[1])} efficiency at {worst[0]} threads",
            f"{worst[0]} threads deliver {_pct(worst[1])} of {worst[0]}x the one-thread rate: memory bandwidth, "
            "storage or another process competes for the cores.",
            "Check that no other work runs on these cores; for remote or slow storage raise read_ahead_bytes.",
            {"threads": worst[0], "efficiency": worst[1]}, None, None, remedy="none",
            severity="medium"))
    if target_rate:
        # Extrapolate from the per-core rate at the largest core count measured,
        # which already carries the scaling losses seen so far.
        widest = max(scan, key=lambda s: (min(s["threads"], cores), s["samples_per_s"]))
        used = min(widest["threads"], cores)
        per_core_scaled = widest["samples_per_s"] / used
        need = math.ceil(target_rate / per_core_scaled)
        measured_ok = [s for s in scan if s["samples_per_s"] >= target_rate]
        if measured_ok:
            t = min(measured_ok, key=lambda s: s["threads"])
            answer = (f"Yes: {t['threads']} thread(s) measured {t['samples_per_s']:.0f} samples/s "
                      f">= {target_rate:g}.")
            cores_needed, extrapolated = min(t["threads"], cores), False
        else:
            need = max(need, used + 1)  # the cores measured did not reach it
            answer = (f"Not with the {used} core(s) measured (best {best['samples_per_s']:.0f} samples/s). "
                      f"Extrapolated from {per_core_scaled:.0f} samples/s per core measured at {widest['threads']} "
                      f"thread(s) ({_pct(eff[widest['threads']])} scaling efficiency), assuming it holds: "
                      f"about {need} cores" + (f"; this machine has {cores}." if need > cores else
                                               f"; measure with --threads up to {need} to confirm."))
            cores_needed, extrapolated = need, True
        summary.update({"target_samples_per_s": target_rate, "can_feed": bool(measured_ok),
                        "cores_needed": cores_needed, "extrapolated": extrapolated, "answer": answer,
                        "per_core_at_scale_samples_per_s": per_core_scaled})
        findings.insert(0, _finding(
            "target_rate",
            f"Target {target_rate:g} samples/s: " + ("can feed" if measured_ok else f"needs ~{need} cores"),
            answer, "" if measured_ok else f"Run with at least {need} cores (threads), or reduce per-sample cost.",
            {"target_samples_per_s": target_rate, "cores_needed": cores_needed, "extrapolated": extrapolated,
             "per_core_samples_per_s": per_core_scaled},
            None, None, remedy="none",
            severity="info" if measured_ok else "high"))
    return findings, summary


