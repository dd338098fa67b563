"""The autotuner against a sweep of static configurations (issue 7).

Image train pipeline through the Python loader, one process per run:
- drain: a loop that only takes batches. Static sweep of threads 1..cores x
  prefetch 1, 3 against the tuned loader (num_threads="auto",
  prefetch_batches="auto", cpu_budget=cores). Target: tuned >= 95% of the
  best static images/s.
- consumer-bound: a loop that spends a fixed time per batch (a simulated
  accelerator at `--demand` of the best static rate). Reported: the fewest
  static threads that keep starvation under 1%, and the tuner's final
  thread count and starvation. Target: no more threads than that.

Results: bench/results/tuner.{md,json}. Medians of --repeats.

    /usr/bin/python3 bench/e2e/tuner_bench.py [--images 2000] [--repeats 3] [--quick]
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(pathlib.Path(__file__).parent))
sys.path.insert(0, str(ROOT))
from bench.common import results as bench_results  # noqa: E402

from image_bench import ensure_dataset  # noqa: E402

PYTHON = "/usr/bin/python3"


def burn_cpu(ms):
    """Pure-Python work for `ms` of this thread's CPU time (a busy machine
    stretches the wall time, not the work)."""
    end = time.thread_time() + ms / 1e3
    while time.thread_time() < end:
        sum(range(500))


def one_run(a):
    """In a child process: one configuration; prints a JSON line."""
    import feedline
    threads = "auto" if a.threads == 0 else a.threads
    prefetch = "auto" if a.prefetch == 0 else a.prefetch
    loader = feedline.Loader(a.data, batch_size=a.batch, transform=feedline.transforms.imagenet_train(),
                             shuffle=True, seed=1, drop_last=True, num_threads=threads,
                             prefetch_batches=prefetch, cpu_budget=a.cpu_budget)
    got, images, wait, t0 = 0, 0, 0.0, None
    total = a.warmup + a.batches
    while got < total:
        it = iter(loader)
        while got < total:
            s = time.perf_counter()
            batch = next(it, None)
            if batch is None:
                break
            waited = time.perf_counter() - s
            got += 1
            if got == a.warmup:
                t0 = time.perf_counter()
            elif got > a.warmup:
                images += batch[0].shape[0]
                wait += waited
            del batch
            if a.step_ms > 0:
                time.sleep(a.step_ms / 1e3)  # the simulated accelerator
            if a.burn_ms > 0:
                burn_cpu(a.burn_ms)  # a step that needs its core
    seconds = time.perf_counter() - t0
    st = loader.stats()
    loader.close()
    print(json.dumps({"images_per_s": images / seconds, "starvation": wait / seconds,
                      "threads_end": st["tuner"]["threads"], "ring_end": st["tuner"]["ring_depth"],
                      "effective_cpu_budget": st["tuner"].get("effective_cpu_budget"),
                      "trainer_step_cores": st["tuner"].get("trainer_step_cores"),
                      "tuner_log": st["tuner"]["log"][-6:]}))


def run(args, data, threads, prefetch, step_ms, budget, burn_ms=0.0):
    cmd = [PYTHON, __file__, "--child", "--data", str(data), "--threads", str(threads),
           "--prefetch", str(prefetch), "--step-ms", str(step_ms), "--cpu-budget", str(budget),
           "--burn-ms", str(burn_ms),
           "--batch", str(args.batch), "--batches", str(args.batches), "--warmup", str(args.warmup)]
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(args.build).resolve() / "python"))
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def wakeup_floor(step_ms, probes=15):
    """This machine's cost of the first Python operations after a pause of
    one step, with no loader running: a floor under any measured wait. (On
    the 2-core development VM, torch.from_numpy of an existing array takes
    ~1 us in a hot loop and 1-5 ms right after a 50-200 ms pause.)"""
    import numpy as np
    import torch
    a = np.zeros((4, 3, 224, 224), np.float32)
    out = []
    for _ in range(probes):
        time.sleep(step_ms / 1e3)
        t = time.perf_counter()
        x = torch.from_numpy(a)
        out.append(time.perf_counter() - t)
        del x
    return statistics.median(out) / (step_ms / 1e3)


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


def trainer_core(a, data, cores):
    """The default budget (auto threads, cpu_budget=None) against static
    thread counts 1..cores+1, for a draining loop and a loop whose step
    burns one core; repeats interleaved. Returns (runs, summary, lines)."""
    statics = list(range(1, cores + 2))
    runs = {"drain": {}, "cpu-step": {}}
    burn_ms = None
    for _rep in range(a.repeats):
        for threads in statics:
            runs["drain"].setdefault(f"static t={threads}", []).append(run(a, data, threads, 3, 0, 0))
        runs["drain"].setdefault("auto", []).append(run(a, data, 0, 0, 0, 0))
        if burn_ms is None:
            # One core of work per batch: a share of what a batch takes at
            # the best static drain rate (the first repeat's).
            best = max(r[0]["images_per_s"] for k, r in runs["drain"].items() if k != "auto")
            burn_ms = a.step_share * 1e3 * a.batch / best
        for threads in statics:
            runs["cpu-step"].setdefault(f"static t={threads}", []).append(
                run(a, data, threads, 3, 0, 0, burn_ms))
        runs["cpu-step"].setdefault("auto", []).append(run(a, data, 0, 0, 0, 0, burn_ms))
    summary, lines = {"burn_ms": burn_ms}, []
    for loop, by in runs.items():
        rates = {k: median_of(v, "images_per_s") for k, v in by.items()}
        best = max((k for k in rates if k != "auto"), key=rates.get)
        ratio = rates["auto"] / rates[best]
        summary[loop] = {"auto_over_best_static": ratio, "best_static": best,
                         "auto_effective_cpu_budget": [r["effective_cpu_budget"] for r in by["auto"]],
                         "auto_threads_end": [r["threads_end"] for r in by["auto"]]}
        step = "only drains" if loop == "drain" else f"burns {burn_ms:.0f} ms of one core per batch"
        lines += [f"## The trainer's core: a loop that {step}", "",
                  "| configuration | images/s | spread | threads at end | threads while stepping |",
                  "|---|---|---|---|---|"]
        for k, v in by.items():
            r = [x["images_per_s"] for x in v]
            eff = v[0]["effective_cpu_budget"]
            lines.append(f"| {k} | {statistics.median(r):.0f} | {min(r):.0f}-{max(r):.0f} | "
                         f"{statistics.median(x['threads_end'] for x in v):.0f} | "
                         f"{'-' if eff is None or k != 'auto' else eff} |")
        lines += ["", f"auto / best static ({best}): **{ratio:.2f}x** (target >= 0.95)", "",
                  "Last tuner decisions (auto, first repeat):", ""]
        lines += [f"    {line}" for line in by["auto"][0]["tuner_log"]]
        lines.append("")
    return runs, summary, lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--batches", type=int, default=24)
    ap.add_argument("--warmup", type=int, default=6)
    ap.add_argument("--demand", type=float, default=0.4, help="consumer rate as a share of the best static")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=["all", "trainer"], default="all")
    ap.add_argument("--build", default=str(ROOT / "build"), help="the build whose python/ package runs")
    ap.add_argument("--step-share", type=float, default=0.5,
                    help="the CPU step's burn as a share of a batch's time at the best static drain rate")
    # Child mode.
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--data")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--prefetch", type=int, default=0)
    ap.add_argument("--step-ms", type=float, default=0)
    ap.add_argument("--cpu-budget", type=int, default=0)
    ap.add_argument("--burn-ms", type=float, default=0)
    a = ap.parse_args()
    if a.child:
        a.cpu_budget = a.cpu_budget or None
        return one_run(a)
    if a.quick:
        a.images, a.repeats, a.batch, a.batches, a.warmup = 300, 1, 32, 6, 2
    cores = os.cpu_count()
    data = ensure_dataset(a.images)
    meta = {"date": datetime.date.today().isoformat(), "machine": platform.machine(), "cores": cores,
            "images": a.images, "batch": a.batch, "batches": a.batches, "repeats": a.repeats,
            "build": a.build}
    trainer_runs, trainer_summary, trainer_lines = trainer_core(a, data, cores)
    if a.only == "trainer":
        text = "\n".join([f"# The trainer's core: auto vs static threads ({meta['date']}, {cores} cores, "
                          f"batch {a.batch}, median of {a.repeats}, build {a.build})", ""] + trainer_lines)
        print(text)
        bench_results.write("tuner-trainer", {"meta": meta, "runs": trainer_runs, "summary": trainer_summary},
                            text, quick=a.quick)
        return

    drain = {}
    for _ in range(a.repeats):
        for threads in range(1, cores + 1):
            for prefetch in (1, 3):
                drain.setdefault(f"static t={threads} p={prefetch}", []).append(
                    run(a, data, threads, prefetch, 0, cores))
        drain.setdefault("tuned", []).append(run(a, data, 0, 0, 0, cores))
    rates = {k: median_of(v, "images_per_s") for k, v in drain.items()}
    best_static = max((k for k in rates if k != "tuned"), key=rates.get)
    ratio = rates["tuned"] / rates[best_static]

    # Consumer-bound: an accelerator taking demand x the best static rate.
    step_ms = 1e3 * a.batch / (a.demand * rates[best_static])
    bound = {}
    for _ in range(a.repeats):
        for threads in range(1, cores + 1):
            bound.setdefault(f"static t={threads}", []).append(run(a, data, threads, 3, step_ms, cores))
        bound.setdefault("tuned", []).append(run(a, data, 0, 0, step_ms, cores))
    starve = {k: median_of(v, "starvation") for k, v in bound.items()}
    floor = wakeup_floor(step_ms)
    # Starvation the loader caused: above the machine's own wake-up floor.
    enough = [t for t in range(1, cores + 1) if starve[f"static t={t}"] - floor < 0.01]
    needed = min(enough) if enough else cores
    tuned_threads = statistics.median(r["threads_end"] for r in bound["tuned"])

    lines = ["# Autotuner vs static configurations (image train pipeline, Python loader)", "",
             f"{meta['date']}, {cores} cores, {a.images} generated images, batch {a.batch}, "
             f"{a.batches} timed batches after {a.warmup}, median of {a.repeats}.", "",
             "## Draining loop", "", "| configuration | images/s | spread |", "|---|---|---|"]
    for k, v in drain.items():
        r = [x["images_per_s"] for x in v]
        lines.append(f"| {k} | {statistics.median(r):.0f} | {min(r):.0f}-{max(r):.0f} |")
    lines += ["", f"tuned / best static ({best_static}): **{ratio:.2f}x** (target >= 0.95)", "",
              f"## Consumer-bound loop ({a.demand:.0%} of the best static rate, {step_ms:.1f} ms per batch)", "",
              "| configuration | images/s | starvation | threads at end |", "|---|---|---|---|"]
    for k, v in bound.items():
        lines.append(f"| {k} | {median_of(v, 'images_per_s'):.0f} | {100 * median_of(v, 'starvation'):.2f}% | "
                     f"{statistics.median(r['threads_end'] for r in v):.0f} |")
    lines += ["", f"wake-up floor of this machine (one Python call right after a {step_ms:.0f} ms pause, no loader "
              f"running): {100 * floor:.2f}% of a step", "",
              f"fewest static threads with starvation < 1% above the floor: {needed}; tuned: {tuned_threads:.0f} "
              f"threads, starvation {100 * starve['tuned']:.2f}% ({100 * (starve['tuned'] - floor):.2f}% above the "
              f"floor; target: threads <= {needed}, < 1%)", "",
              "Last tuner decisions (consumer-bound, first repeat):", ""]
    lines += [f"    {line}" for line in bound["tuned"][0]["tuner_log"]]
    lines += [""] + trainer_lines
    text = "\n".join(lines) + "\n"
    print(text)
    bench_results.write("tuner", {"meta": meta, "drain": drain, "bound": bound,
                            "summary": {"tuned_over_best_static": ratio, "best_static": best_static,
                                        "threads_needed": needed, "tuned_threads": tuned_threads,
                                        "tuned_starvation": starve["tuned"], "wakeup_floor": floor,
                                        "trainer_core": trainer_summary},
                            "trainer_core": trainer_runs},
                  text, quick=a.quick)


if __name__ == "__main__":
    main()
