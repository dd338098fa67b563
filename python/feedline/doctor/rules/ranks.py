"""The rule across ranks (the report's "ranks" section, under
torch.distributed): the slowest rank holds every other at the collective.

Each rank's own time per step is its wait for data plus its step, less the
time inside collectives (ranks.py). The job's period is about the slowest
rank's own time plus the collective itself; were the straggler as fast as
the next slowest, the period would shrink by their difference, and the
job's rate grow by the same factor."""
from __future__ import annotations

import statistics
from typing import Optional

from .common import SIGNIFICANT, Ev, Finding, _finding, _ms, current_rate


def straggler(ev: Ev) -> Optional[Finding]:
    rk = ev.get("ranks")
    if not rk or len(rk.get("list") or []) < 2:
        return None
    rows = rk["list"]
    slow = next(r for r in rows if r["rank"] == rk["slowest"])
    others = [r for r in rows if r["rank"] != rk["slowest"]]
    typical = statistics.median(r["own_mean_s"] for r in others)
    if typical <= 0 or slow["own_mean_s"] < SIGNIFICANT * typical:
        return None
    second = max(r["own_mean_s"] for r in others)
    period = statistics.median(r["wait_mean_s"] + r["step_mean_s"] for r in rows)
    saved = min(slow["own_mean_s"] - second, 0.95 * period)
    now = current_rate(ev)
    pred = now * period / (period - saved) if now and period > saved > 0 else None
    others_wait = statistics.median(r["wait_mean_s"] for r in others)
    wait_extra = slow["wait_mean_s"] - others_wait
    part = "input" if wait_extra > 0.5 * (slow["own_mean_s"] - typical) else "step"
    how = ("time inside collectives measured" if rk.get("collectives_timed") else
           "collectives not seen (DDP reduces inside backward): own time = wait + the step's CPU time")
    what = (f"it waits {_ms(slow['wait_mean_s'])} per step for data against {_ms(others_wait)} on the others"
            if part == "input" else
            f"its step takes {_ms(slow['own_mean_s'] - slow['wait_mean_s'])} of its own against "
            f"{_ms(statistics.median(r['own_mean_s'] - r['wait_mean_s'] for r in others))} on the others")
    fix = (f"Speed up rank {slow['rank']}'s input (host {slow['host']}): its own doctor findings (the per-rank "
           "table's evidence), more workers or feedline.Loader there, or its share of the data on faster storage."
           if part == "input" else
           f"Find what makes rank {slow['rank']}'s step slower (host {slow['host']}): a slower or shared device, "
           "more work in its batches (uneven sequence lengths or image sizes: bucket them), throttling, another "
           "process on its cores; balance the work across ranks.")
    return _finding(
        "straggler", f"Rank {slow['rank']} is the straggler: the other {len(others)} rank(s) wait for it every step",
        f"Rank {slow['rank']} spends {_ms(slow['own_mean_s'])} per step of its own (waiting for data plus its step, "
        f"outside collectives) against {_ms(typical)} on the median other rank: {what}. The others wait for it "
        f"inside the collective, which their reports show as step time ({how}).",
        fix,
        {"slowest": slow["rank"], "own_mean_s": slow["own_mean_s"], "others_median_own_s": typical,
         "period_s": period, "part": part, "collectives_timed": rk.get("collectives_timed")},
        pred, now, remedy="removes_work")
