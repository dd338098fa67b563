"""`make bench-peers`: feedline and the real peers side by side, in one run,
on the same generated datasets (bench/peers/datasets.py: the ~500 px set of
`make bench` and a 1-4 MP set), the same cores, batch 256, the train recipe
(RandomResizedCrop 224 + flip + normalise, float32) and the eval recipe
(Resize 256 + CenterCrop 224 + normalise).

Each peer runs in a subprocess, from its own virtual environment's python
(bench/peers/envs.py), in interleaved rounds (every peer once per round, so
the machine's drift hits all alike); the tables give medians. Per peer:
images/s, feedline's rate over the peer's, CPU-seconds per 1000 images (the
timed window, all threads and processes), peak PSS of the whole process tree
(sampled here from /proc/*/smaps_rollup), time to first batch, and the
sanity check: per-channel mean and std of its normalised output within
TOLERANCE of torchvision's (torch-pil on the same dataset and recipe), shape
and dtype as asked. A peer that cannot be installed or run is listed with
its exact error, never dropped.

    python3 bench/peers/run.py [--rounds 3] [--quick]
Results: bench/results/peers.{md,json} (--quick: peers-quick.*, not committed).
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
import tempfile
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))
from bench.common import procfs  # noqa: E402
from bench.common import results as bench_results  # noqa: E402

import envs  # noqa: E402

ROOT = envs.ROOT
TOLERANCE = 0.15  # absolute, per channel, on the normalised scale (std of the data ~1.1-1.3)

# name -> (environment, script, extra environment variables)
PEERS = {
    "feedline": ("torch", "peer_feedline.py", {"PYTHONPATH": envs.feedline_pythonpath()}),
    "torch-pil": ("torch", "peer_torch.py", {"PEER_TORCH_MODE": "pil"}),
    "torch-decode_jpeg": ("torch", "peer_torch.py", {"PEER_TORCH_MODE": "decode"}),
    "pillow-simd": ("pillow-simd", "peer_torch.py", {"PEER_TORCH_MODE": "pil"}),
    "dali": ("dali", "peer_dali.py", {}),
    "spdl": ("spdl", "peer_spdl.py", {}),
    "tf.data": ("tf", "peer_tf.py", {}),
    "ffcv": ("ffcv", "peer_ffcv.py", {}),
    "grain": ("grain", "peer_grain.py", {}),
}
REFERENCE = "torch-pil"


def one_line_reason(text):
    """The most telling line of an error text (for the table; the whole
    text goes to the JSON)."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for l in reversed(lines):
        if any(k in l for k in ("Error:", "error:", "ERROR:")) and "subprocess-exited-with-error" not in l \
                and "See above" not in l:
            return l
    return lines[-1] if lines else "(no output)"


def run_peer(name, data, recipe, a):
    env_name, script, extra = PEERS[name]
    cmd = [str(envs.python_of(env_name)), str(HERE / script), "--data", str(data), "--recipe", recipe,
           "--cores", str(a.cores), "--batch", str(a.batch), "--batches", str(a.batches[data]),
           "--warmup", str(a.warmup[data])]
    env = dict(os.environ, OMP_NUM_THREADS=str(a.cores), **extra)
    # Output to files, not pipes: worker processes a peer leaves behind (its
    # os._exit skips their teardown; Grain's spawned workers outlive it) would
    # hold a pipe open. The peer's session is killed once it has exited.
    shm_before = procfs.shm_names()
    with tempfile.TemporaryFile("w+") as fout, tempfile.TemporaryFile("w+") as ferr:
        proc = subprocess.Popen(cmd, stdout=fout, stderr=ferr, text=True, env=env, cwd=ROOT,
                                start_new_session=True)
        peak, done = [0], threading.Event()

        def sample():
            start = time.monotonic()
            while not done.is_set():
                peak[0] = max(peak[0], procfs.pss_bytes(procfs.tree_pids(proc.pid)))
                time.sleep(0.05 if time.monotonic() - start < 2.0 else 0.2)

        t = threading.Thread(target=sample, daemon=True)
        t.start()
        timed_out = False
        try:
            proc.wait(timeout=a.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        done.set()
        t.join()
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        proc.wait()
        # Killed workers never unlink their shared memory (Grain's batches:
        # a full run left 200 segments of 154 MB, 10 GB of RAM, in /dev/shm).
        leaked, leaked_bytes = procfs.reclaim_python_shm(shm_before)
        fout.seek(0)
        ferr.seek(0)
        out, err = fout.read(), ferr.read()
    if timed_out:
        err += f"\ntimed out after {a.timeout} s"
    lines = out.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"error": f"exit {proc.returncode}: " + err.strip()[-3000:]}
    r = json.loads(lines[-1])
    r["peak_pss"] = peak[0]
    r["shm_reclaimed"] = {"segments": leaked, "bytes": leaked_bytes}
    return r


def summarize(runs):
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {"error": runs[-1]["error"]}
    rates = [r["images_per_s"] for r in ok]
    med = lambda key: statistics.median(r[key] for r in ok)  # noqa: E731
    return {"images_per_s": statistics.median(rates), "min": min(rates), "max": max(rates),
            "cpu_s_per_1000": statistics.median(1000 * r["cpu_s"] / r["images"] for r in ok),
            "peak_mib": max(r["peak_pss"] for r in ok) / 2**20, "first_batch_s": med("first_batch_s"),
            "mean": [statistics.median(r["mean"][c] for r in ok) for c in range(3)],
            "std": [statistics.median(r["std"][c] for r in ok) for c in range(3)],
            "shape": ok[0]["shape"], "dtype": ok[0]["dtype"], "layout": ok[0]["layout"],
            "version": ok[0]["version"], "runs": len(ok), "failed_runs": len(runs) - len(ok),
            "errors": [r["error"] for r in runs if "error" in r]}


# Below this many images, the statistics of random crops (train: each peer
# draws its own) differ by chance more than TOLERANCE on the generated
# sets, so the check judges the shape and dtype only.
MIN_RANDOM_CROPS = 256


def sanity(s, ref, batch, random_crops=False):
    want = [batch, 3, 224, 224] if s["layout"] == "NCHW" else [batch, 224, 224, 3]
    if s["shape"] != want or s["dtype"] != "float32":
        return False, f"shape {s['shape']} {s['dtype']}, want {want} float32"
    if ref is None or "error" in ref:
        return False, "no torchvision reference"
    dm = max(abs(x - y) for x, y in zip(s["mean"], ref["mean"]))
    ds = max(abs(x - y) for x, y in zip(s["std"], ref["std"]))
    figures = f"max |d mean| {dm:.3f}, max |d std| {ds:.3f}"
    if random_crops and batch < MIN_RANDOM_CROPS:
        return True, f"{figures}: not judged, {batch} random crops"
    return dm <= TOLERANCE and ds <= TOLERANCE, figures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--small", type=int, default=2000, help="images in the ~500 px set")
    ap.add_argument("--large", type=int, default=512, help="images in the 1-4 MP set")
    ap.add_argument("--cores", type=int, default=os.cpu_count())
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--large-warmup", type=int, default=2)
    ap.add_argument("--large-batches", type=int, default=3, help="timed batches on the large set")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--quick", action="store_true", help="CI: tiny datasets, 1 round, a few batches")
    a = ap.parse_args()
    t_start = time.monotonic()
    if a.quick:
        a.rounds, a.small, a.large, a.batch = 1, 128, 48, 32
    else:
        a.batch = 256
    names = a.peers.split(",")
    statuses = {e: envs.setup(e) for e in dict.fromkeys(PEERS[n][0] for n in names)}
    setup_s = time.monotonic() - t_start
    if not statuses["torch"]["ok"]:
        raise SystemExit("venv-torch (feedline, torchvision reference, datasets) failed:\n" +
                         statuses["torch"]["error"])
    t_data = time.monotonic()
    out = subprocess.run([str(envs.python_of("torch")), str(HERE / "datasets.py"), "--feedline",
                          str(envs.FEEDLINE_BUILD / "tools" / "feedline"), "--small", str(a.small),
                          "--large", str(a.large)], check=True, capture_output=True, text=True, cwd=ROOT)
    data = {k: pathlib.Path(v) for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}
    data_s = time.monotonic() - t_data
    # Warm-up long enough to drain what a peer prefetched before the timed
    # window (DataLoader: workers x prefetch_factor), then the timed batches.
    a.warmup = {data["small"]: 1 if a.quick else 3, data["large"]: 1 if a.quick else a.large_warmup}
    a.batches = {data["small"]: 2 if a.quick else 6, data["large"]: 2 if a.quick else a.large_batches}
    runnable = [n for n in names if statuses[PEERS[n][0]]["ok"]]
    runs = {}
    t_runs = time.monotonic()
    for rnd in range(a.rounds):
        for ds_name, path in data.items():
            for recipe in ("train", "eval"):
                for name in runnable:  # interleaved: every peer once per round
                    r = run_peer(name, path, recipe, a)
                    runs.setdefault((ds_name, recipe, name), []).append(r)
                    print(f"[round {rnd + 1}/{a.rounds}] {ds_name}/{recipe}/{name}: " +
                          (f"{r['images_per_s']:.0f} images/s" if "error" not in r else
                           "FAILED: " + one_line_reason(r["error"])), flush=True)
    runs_s = time.monotonic() - t_runs
    results, problems = {}, []
    for ds_name in data:
        for recipe in ("train", "eval"):
            key = f"{ds_name}/{recipe}"
            table = {n: summarize(runs[(ds_name, recipe, n)]) for n in runnable}
            ref = table.get(REFERENCE)
            fl = table.get("feedline")
            for n, s in table.items():
                if "error" in s:
                    problems.append(f"{key}/{n}: {one_line_reason(s['error'])}")
                    continue
                s["sane"], s["sanity"] = sanity(s, ref, a.batch, random_crops=recipe == "train")
                if not s["sane"]:
                    problems.append(f"{key}/{n}: output check failed ({s['sanity']})")
                if fl and "error" not in fl:
                    s["feedline_over_peer"] = fl["images_per_s"] / s["images_per_s"]
            for n in names:
                if n not in runnable:
                    st = statuses[PEERS[n][0]]
                    table[n] = {"error": st["error"], "not_installed": True}
            results[key] = table
    mem_gib = procfs.meminfo()["MemTotal"] / 2**30
    load = os.getloadavg()
    meta = {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {a.cores} cores "
            f"({os.cpu_count()} online), {mem_gib:.0f} GiB", "load_average_at_end": [round(x, 2) for x in load],
            "datasets": {"small": f"{a.small} generated images, long side 300-500 px ({data['small'].name})",
                         "large": f"{a.large} generated 1-4 megapixel JPEGs ({data['large'].name})"},
            "batch": a.batch, "rounds": a.rounds, "warmup_batches": {k: a.warmup[p] for k, p in data.items()},
            "timed_batches": {k: a.batches[p] for k, p in data.items()}, "tolerance": TOLERANCE,
            "python": sys.version.split()[0], "setup_s": round(setup_s, 1), "datasets_s": round(data_s, 1),
            "runs_s": round(runs_s, 1),
            "env_setup_s": {e: s.get("seconds") for e, s in statuses.items()}}
    text = render(results, meta, names)
    print(text)
    bench_results.write("peers", {"meta": meta, "results": results}, text, quick=a.quick)
    if problems:
        print("problems:\n  " + "\n  ".join(problems))
    # CI (quick): a peer that installed but does not run, or gives output of
    # the wrong shape, is the rot this mode exists to catch.
    if a.quick and any("output check failed (shape" in p or "output check" not in p for p in problems):
        sys.exit(1)


def render(results, meta, names):
    lines = ["# feedline and the peers", "",
             f"{meta['date']}, {meta['machine']}, Python {meta['python']}, batch {meta['batch']}, "
             f"median of {meta['rounds']} interleaved round(s); load average at the end "
             f"{meta['load_average_at_end'][0]:.1f} (the machine is shared: figures are noisy).",
             f"Datasets: small = {meta['datasets']['small']}; large = {meta['datasets']['large']}. "
             f"Warm-up / timed batches: small {meta['warmup_batches']['small']}/{meta['timed_batches']['small']}, "
             f"large {meta['warmup_batches']['large']}/{meta['timed_batches']['large']}.",
             f"Output check: per-channel mean and std of the normalised first batch within "
             f"{meta['tolerance']} of torchvision's (torch-pil), shape and dtype as asked; on train batches of "
             f"fewer than {MIN_RANDOM_CROPS} images (each peer draws its own random crops) the shape and dtype "
             "only.", ""]
    for key, table in results.items():
        lines += [f"## {key}", "",
                  "| peer | images/s | spread | feedline / peer | CPU-s / 1000 images | peak PSS | first batch | "
                  "output check |", "|---|---|---|---|---|---|---|---|"]
        for n in names:
            s = table.get(n)
            if s is None:
                continue
            if "error" in s:
                why = "not installed" if s.get("not_installed") else "failed"
                lines.append(f"| {n} | {why}: `{one_line_reason(s['error'])}` | | | | | | |")
                continue
            ratio = f"{s['feedline_over_peer']:.2f}x" if "feedline_over_peer" in s else "-"
            lines.append(f"| {n} | {s['images_per_s']:.0f} | {s['min']:.0f}-{s['max']:.0f} | {ratio} | "
                         f"{s['cpu_s_per_1000']:.2f} | {s['peak_mib']:.0f} MiB | {s['first_batch_s']:.2f} s | "
                         f"{'ok' if s['sane'] else 'FAILED'} ({s['sanity']}) |")
        lines.append("")
    vers = {}
    for table in results.values():
        for n, s in table.items():
            if "version" in s:
                vers[n] = s["version"]
    lines += ["Versions: " + "; ".join(f"{n}: {v}" for n, v in vers.items()) + ".",
              f"Set-up this run: {meta['setup_s']:.0f} s for the environments (cached in $FEEDLINE_CACHE/peers), "
              f"{meta['datasets_s']:.0f} s for the datasets, {meta['runs_s']:.0f} s of runs."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
