#!/usr/bin/env python3
"""The GPU run: real training steps fed by torch's DataLoader and by feedline.

For each model (torchvision ResNet-50 and ResNet-18, random init, bf16
autocast, channels_last, SGD) and each loader:

  torch     DataLoader over torchvision ImageFolder with RandomResizedCrop +
            RandomHorizontalFlip + ToTensor + Normalize on PIL images,
            num_workers = cores, pin_memory, persistent_workers; batches are
            copied with .to(device, non_blocking=True) as the tutorials do.
  feedline  feedline.Loader(transform=imagenet_train(size), num_threads = cores,
            device="cuda"): batches arrive on the GPU, copied on a side stream.

it trains --warmup steps, then --steps measured steps in windows of --window
steps (torch.cuda.synchronize only at window edges), and reports:

  images/s         median over windows of (window images / window wall time)
  starvation %     share of the GPU's time in the measured windows spent idle
                   waiting for the next batch (CUDA events around each step:
                   the gap between one step's end and the next one's start);
                   on a CPU (--dry-run) the host's wait share instead
  host wait %      share of wall time the loop spent getting the next batch
                   (next() and, for torch, issuing the host-to-device copy)
  CPU              CPU-seconds of the whole process tree (threads and
                   DataLoader worker processes, from /proc) over the measured
                   windows: per 1000 images and as cores busy; also the part
                   off the training loop's own thread
  peak memory      peak PSS (and RSS) of the process tree, sampled every 0.2 s
                   by a thread of this (parent) process; and the tree's PSS
                   before the loader was made

Each run is its own child process (this script with --child), so memory and
CPU are those of that run alone. Then the device checksum test (RELIABILITY
item 31): --checksum-batches batches from feedline with device="cuda", each
checksummed on the GPU, against the host checksums of the same batches from
a second feedline loader with the same seed and device=None (output is
deterministic: same seed, same bytes). Every mismatch is a batch whose host
buffer was refilled before its copy completed. Mismatches must be 0.

Results: bench/results/gpu_<date>.{json,md} (and copies in $OUT when it is set).

    python3 bench/gpu/train_bench.py --data DIR          # on the GPU machine (bench/gpu/run.sh)
    python3 bench/gpu/train_bench.py --dry-run           # on a CPU: tiny and quick, exercises the code

The dataset: --data, else --images images generated with $FEEDLINE_BIN
gen-dataset into a temporary directory.
"""
import argparse
import datetime
import json
import math
import os
import pathlib
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.common import procfs  # noqa: E402
from bench.common import results as bench_results  # noqa: E402

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
RESULT_PREFIX = "TRAIN_BENCH_RESULT "


def cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


# --- /proc: the process tree, its CPU time and memory (bench/common/procfs.py)

def thread_cpu_seconds(pid, tid):
    return procfs.process_cpu_seconds(pid, tid) or 0.0


class MemorySampler(threading.Thread):
    """Samples the memory of a process tree until stopped; keeps the peaks."""

    def __init__(self, pid, interval=0.2):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_pss, self.peak_rss, self.samples = None, 0, 0
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            self.sample()
            self._halt.wait(self.interval)

    def sample(self):
        pss, rss = procfs.memory_bytes(procfs.tree_pids(self.pid))
        if pss is not None:
            self.peak_pss = max(self.peak_pss or 0, pss)
        self.peak_rss = max(self.peak_rss, rss)
        self.samples += 1

    def stop(self):
        self._halt.set()
        self.join()


# --- child: one training run --------------------------------------------------

def _json_safe(x):
    if isinstance(x, dict):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if isinstance(x, (bool, int, str)) or x is None:
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else str(x)
    try:
        return _json_safe(x.tolist())
    except AttributeError:
        return str(x)


def environment(torch, device):
    import torchvision
    env = {"torch": torch.__version__, "torchvision": torchvision.__version__,
           "python": platform.python_version(), "cuda": torch.version.cuda, "device": str(device)}
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
        env["cudnn"] = torch.backends.cudnn.version()
        props = torch.cuda.get_device_properties(device)
        env["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
    return env


def feedline_loader(cfg, device, batch_size, transform, num_threads):
    """feedline.Loader on `device`; returns (loader, whether batches arrive
    on the device). device=None gives host batches. A Loader without the
    device argument falls back to host batches (copied by the caller)."""
    import feedline
    kwargs = dict(batch_size=batch_size, transform=transform, shuffle=True, seed=cfg["seed"], drop_last=True,
                  num_threads=num_threads)
    if device is not None and device.type == "cuda":
        try:
            return feedline.Loader(cfg["data"], device=str(device), **kwargs), True
        except TypeError as e:
            if "device" not in str(e):
                raise
            print(f"train_bench: feedline.Loader has no device argument ({e}); copying host batches",
                  file=sys.stderr)
    return feedline.Loader(cfg["data"], **kwargs), False


def feedline_epochs(loader):
    epoch = 0
    while True:
        loader.set_epoch(epoch)
        yield from loader
        epoch += 1


def child_train(cfg):
    import torch
    import torchvision

    device = torch.device(cfg["device"])
    cuda = device.type == "cuda"
    torch.manual_seed(cfg["seed"])
    if cuda:
        torch.backends.cudnn.benchmark = True
    model = getattr(torchvision.models, cfg["model"])(num_classes=cfg["classes"])  # random init
    model = model.to(device, memory_format=torch.channels_last)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    amp = cfg["amp"] == "bf16"
    B, size, workers = cfg["batch_size"], cfg["image_size"], cfg["workers"]
    pid = os.getpid()
    mem_before_loader = procfs.memory_bytes(procfs.tree_pids(pid))

    t_create = time.perf_counter()
    on_device = False
    if cfg["loader"] == "torch":
        import torchvision.transforms as T
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder
        tf = T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
        prefetch = shm_prefetch_factor(workers, B * 3 * size * size * 4)
        loader = DataLoader(ImageFolder(cfg["data"], tf), batch_size=B, shuffle=True, num_workers=workers,
                            pin_memory=cuda, persistent_workers=workers > 0, drop_last=True,
                            **({"prefetch_factor": prefetch} if workers > 0 else {}))

        def batches():
            while True:
                yield from loader
    else:
        import feedline
        loader, on_device = feedline_loader(cfg, device, B, feedline.transforms.imagenet_train(size), workers)

        def batches():
            return feedline_epochs(loader)

    it = batches()
    steps, warmup, window = cfg["steps"], cfg["warmup"], cfg["window"]
    total = warmup + steps
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(steps)] if cuda else None
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(steps)] if cuda else None
    edges, waits, losses = [], [], []
    first_batch_s = None
    cpu0 = main0 = None
    for step in range(total):
        m = step - warmup  # measured step index, negative during warm-up
        if m >= 0 and m % window == 0:
            if cuda:
                torch.cuda.synchronize(device)
            edges.append(time.perf_counter())
            if m == 0:
                cpu0, main0 = procfs.cpu_seconds(procfs.tree_pids(pid)), thread_cpu_seconds(pid, pid)
        t0 = time.perf_counter()
        images, labels = next(it)
        if not on_device and cuda:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
        t1 = time.perf_counter()
        if first_batch_s is None:
            first_batch_s = t1 - t_create
        if m >= 0:
            waits.append(t1 - t0)
            if cuda:
                starts[m].record()
        images = images.to(memory_format=torch.channels_last)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=amp):
            loss = loss_fn(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if m >= 0 and cuda:
            ends[m].record()
        if step in (0, total - 1):
            losses.append(loss.detach())
        del images, labels, loss
    if cuda:
        torch.cuda.synchronize(device)
    edges.append(time.perf_counter())
    cpu = procfs.cpu_seconds(procfs.tree_pids(pid)) - cpu0
    main_cpu = thread_cpu_seconds(pid, pid) - main0
    workers_alive = len(procfs.tree_pids(pid)) - 1

    walls = [b - a for a, b in zip(edges, edges[1:])]
    win_steps = [min(window, steps - i * window) for i in range(len(walls))]
    rates = [n * B / w for n, w in zip(win_steps, walls)]
    wall = sum(walls)
    images_measured = steps * B
    host_wait_pct = 100.0 * sum(waits) / wall
    gpu_idle_pct = None
    if cuda:
        idle = span = 0.0
        for w, n in enumerate(win_steps):
            first, last = w * window, w * window + n - 1
            span += starts[first].elapsed_time(ends[last])
            idle += sum(ends[s - 1].elapsed_time(starts[s]) for s in range(first + 1, last + 1))
        gpu_idle_pct = 100.0 * idle / span if span > 0 else None
    stats = None
    if cfg["loader"] == "feedline":
        try:
            stats = _json_safe(loader.stats())
        except Exception as e:  # diagnostics only
            stats = {"error": repr(e)}
        loader.close()
    else:
        del it
        loader._iterator = None  # shuts the persistent workers down
    loss_values = [float(x) for x in losses]
    return {
        "model": cfg["model"], "loader": cfg["loader"], "device": str(device),
        "batches_on_device_from_loader": on_device,
        "batch_size": B, "image_size": size, "workers": workers, "amp": cfg["amp"],
        "warmup_steps": warmup, "steps": steps, "window_steps": window,
        "images_per_s": round(statistics.median(rates), 1),
        "images_per_s_windows": [round(r, 1) for r in rates],
        "images_per_s_overall": round(images_measured / wall, 1),
        "starvation_pct": round(gpu_idle_pct if gpu_idle_pct is not None else host_wait_pct, 2),
        "starvation_source": "gpu idle between steps (CUDA events)" if cuda else "host wait for the next batch",
        "gpu_idle_pct": None if gpu_idle_pct is None else round(gpu_idle_pct, 2),
        "host_wait_pct": round(host_wait_pct, 2),
        "measured_wall_s": round(wall, 3),
        "cpu_s": round(cpu, 2),
        "cpu_s_per_1000_images": round(1000 * cpu / images_measured, 3),
        "cpu_cores_busy": round(cpu / wall, 2),
        "cpu_off_main_thread_s": round(cpu - main_cpu, 2),
        "processes_in_tree": workers_alive + 1,
        "time_to_first_batch_s": round(first_batch_s, 3),
        "pss_before_loader_bytes": mem_before_loader[0],
        "rss_before_loader_bytes": mem_before_loader[1],
        "loss_first": loss_values[0], "loss_last": loss_values[-1],
        "env": environment(torch, device),
        "loader_stats": stats,
    }


# --- child: the device checksum test (RELIABILITY item 31) -----------------------

def batch_checksum(torch, images, labels, weights):
    """[sum, position-weighted sum] of the image bytes and of the labels, in
    int64 on the tensors' own device: exact integer arithmetic, so a device
    and a host checksum of equal bytes are equal."""
    x = images.contiguous().reshape(-1)
    if x.dtype.is_floating_point:
        x = x.view(torch.int32 if x.element_size() == 4 else torch.int16)
    x = x.to(torch.int64)
    y = labels.reshape(-1).to(torch.int64)
    n = max(x.numel(), y.numel())
    w = weights.get((n, x.device))
    if w is None:
        w = weights[(n, x.device)] = torch.arange(n, dtype=torch.int64, device=x.device) % 65521 + 1
    return torch.stack([x.sum(), (x * w[:x.numel()]).sum(), y.sum(), (y * w[:y.numel()]).sum()])


def child_checksum(cfg):
    import torch

    import feedline

    device = torch.device(cfg["device"])
    cuda = device.type == "cuda"
    n, B = cfg["checksum_batches"], cfg["checksum_batch_size"]

    def transform():
        return feedline.transforms.imagenet_train(cfg["checksum_image_size"], dtype=torch.uint8)

    weights = {}
    rng = random.Random(cfg["seed"])

    # Pass 1: batches delivered on the device, checksummed there.
    t0 = time.perf_counter()
    loader, on_device = feedline_loader(cfg, device if cuda else None, B, transform(), cfg["workers"])
    sums = torch.zeros((n, 4), dtype=torch.int64, device=device)
    stress = cuda and cfg["checksum_stress"]
    if stress:
        # Contend for the copy engine and stall the consuming stream now and
        # then, so that copies are late and batches pile up behind them.
        side = torch.cuda.Stream(device)
        big_host = torch.empty(64 << 20, dtype=torch.uint8).pin_memory()
        big_dev = torch.empty_like(big_host, device=device)
    count = 0
    for images, labels in feedline_epochs(loader):
        if cuda and not on_device:
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        sums[count] = batch_checksum(torch, images, labels, weights)
        del images, labels
        count += 1
        if stress and count % 16 == 0:
            if hasattr(torch.cuda, "_sleep"):
                torch.cuda._sleep(rng.randrange(0, 2_000_000))  # up to ~1 ms of GPU clock cycles
            with torch.cuda.stream(side):
                big_dev.copy_(big_host, non_blocking=True)
        if count == n:
            break
    device_stats = None
    try:
        device_stats = _json_safe(loader.stats().get("device"))
    except Exception:
        pass
    loader.close()
    if cuda:
        torch.cuda.synchronize(device)
    device_sums = sums.cpu()
    t_device = time.perf_counter() - t0

    # Pass 2: the same batches (same seed) on the host.
    t0 = time.perf_counter()
    loader, _ = feedline_loader(cfg, None, B, transform(), cfg["workers"])
    host_sums = torch.zeros((n, 4), dtype=torch.int64)
    count = 0
    for images, labels in feedline_epochs(loader):
        host_sums[count] = batch_checksum(torch, images, labels, weights)
        del images, labels
        count += 1
        if count == n:
            break
    loader.close()
    t_host = time.perf_counter() - t0

    bad = (device_sums != host_sums).any(dim=1).nonzero().flatten().tolist()
    return {
        "batches": n, "batch_size": B, "image_size": cfg["checksum_image_size"], "dtype": "uint8",
        "device": str(device), "batches_on_device_from_loader": on_device, "stress": bool(stress),
        "mismatches": len(bad), "first_mismatches": bad[:10],
        "device_pass_s": round(t_device, 2), "host_pass_s": round(t_host, 2),
        "device_stats": device_stats, "env": environment(torch, device),
    }


# --- parent ---------------------------------------------------------------------

def generate_dataset(images, classes):
    binary = os.environ.get("FEEDLINE_BIN", str(ROOT / "build" / "tools" / "feedline"))
    root = pathlib.Path(tempfile.mkdtemp(prefix="feedline-train-bench-"))
    data = root / "data"
    subprocess.run([binary, "gen-dataset", str(data), "--images", str(images), "--classes", str(classes),
                    "--photos", str(ROOT / "tests" / "data" / "photos")], check=True, stdout=subprocess.DEVNULL)
    return root, data


def run_child(kind, cfg, timeout):
    """Runs this script as a child; returns its result dict (with peak memory
    and wall time) or {"error": ...}."""
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--child", kind, "--child-config", json.dumps(cfg)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    sampler = MemorySampler(proc.pid)
    sampler.start()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for pid in reversed(procfs.tree_pids(proc.pid)):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        proc.communicate()
        sampler.stop()
        return {"error": f"timed out after {timeout:.0f} s"}
    sampler.stop()
    result = None
    for line in out.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX):])
        else:
            print(line)
    if proc.returncode != 0 or result is None:
        return {"error": f"exit status {proc.returncode} (see the log above)"}
    result["peak_pss_bytes"] = sampler.peak_pss
    result["peak_rss_bytes"] = sampler.peak_rss
    result["process_wall_s"] = round(time.perf_counter() - t0, 2)
    return result


def mib(x):
    return "n/a" if x is None else f"{x / 2**20:,.0f} MiB"


def markdown(report):
    m, c = report["machine"], report["config"]
    lines = [f"# GPU run, {report['date']}" + (" (DRY RUN on CPU: numbers mean nothing)" if c["dry_run"] else ""), ""]
    lines.append(f"Machine: {m.get('gpu', 'no GPU')}, {m['cores']} cores, {m['os']}; torch {m.get('torch', '?')} "
                 f"(CUDA {m.get('cuda') or 'none'}), torchvision {m.get('torchvision', '?')}, Python {m['python']}; "
                 f"feedline {m['commit']}." + (f" nvidia-smi: {m['nvidia_smi']}." if m.get("nvidia_smi") else ""))
    lines.append(f"Dataset: {c['dataset_images']} generated ImageNet-like images in {c['classes']} classes "
                 f"(`feedline gen-dataset`), on local disk. Batch {c['batch_size']}, {c['image_size']} px, "
                 f"{c['warmup']} warm-up steps then {c['steps']} measured in windows of {c['window']}; "
                 f"{c['amp']} autocast, channels_last, SGD. Workers/threads: {c['workers']} (= cores).")
    lines += ["", "| model | loader | images/s (median of windows) | images/s (all windows) | starvation % | "
              "host wait % | CPU cores busy | CPU-s / 1000 images | peak host memory (PSS) | before loader | "
              "first batch |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["runs"]:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['loader']} | error: {r['error']} | | | | | | | | |")
            continue
        peak = r["peak_pss_bytes"] if r["peak_pss_bytes"] is not None else r["peak_rss_bytes"]
        before = r["pss_before_loader_bytes"]
        if before is None:
            before = r["rss_before_loader_bytes"]
        lines.append(f"| {r['model']} | {r['loader']} | {r['images_per_s']:,.0f} | {r['images_per_s_overall']:,.0f} | "
                     f"{r['starvation_pct']:.1f} | "
                     f"{r['host_wait_pct']:.1f} | {r['cpu_cores_busy']:.1f} | {r['cpu_s_per_1000_images']:.2f} | "
                     f"{mib(peak)} | {mib(before)} | {r['time_to_first_batch_s']:.2f} s |")
    ratios = report.get("ratios", {})
    if ratios:
        lines += ["", "feedline / torch, images/s: " +
                  ", ".join(f"{model} {ratio:.2f}x" for model, ratio in ratios.items()) + "."]
    lines += ["", "Starvation: " + ("the share of the GPU's time in the measured windows that it sat idle "
                                    "between one training step's end and the next one's start (CUDA events), "
                                    "waiting for input." if not c["dry_run"] else
                                    "the host's wait for the next batch (no GPU in a dry run).") +
              " Host wait: the loop's time in next() (and, for torch, issuing the copy to the GPU) over wall "
              "time. CPU: the whole process tree (loader threads, DataLoader worker processes, the training "
              "loop) over the measured windows. Peak memory: the process tree's PSS, sampled every 0.2 s."]
    ck = report.get("checksum")
    if ck:
        lines += ["", "## Device checksum test (RELIABILITY item 31)", ""]
        if "error" in ck:
            lines.append(f"error: {ck['error']}")
        elif ck.get("skipped"):
            lines.append(f"skipped: {ck['skipped']}")
        else:
            verdict = "PASS" if ck["mismatches"] == 0 else "FAIL"
            lines.append(f"{verdict}: {ck['batches']:,} batches of {ck['batch_size']} ({ck['image_size']} px "
                         f"uint8) from feedline on {ck['device']}"
                         f"{'' if ck['batches_on_device_from_loader'] else ' (host batches: no device path)'}, "
                         f"checksummed there, against the host checksums of the same batches (same seed, "
                         f"device=None): {ck['mismatches']} mismatches. Copy-engine and stream stalls "
                         f"{'on' if ck['stress'] else 'off'}. Device pass {ck['device_pass_s']} s, host pass "
                         f"{ck['host_pass_s']} s.")
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", help="ImageFolder dataset (default: generate --images into a temporary directory)")
    p.add_argument("--images", type=int, default=32768, help="images to generate when --data is not given")
    p.add_argument("--classes", type=int, default=100)
    p.add_argument("--models", default="resnet50,resnet18")
    p.add_argument("--loaders", default="torch,feedline")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--warmup", type=int, default=None,
                   help="warm-up steps; default 10 + 2 x workers, so that the DataLoader's initial prefetch "
                        "(prefetch_factor 2 batches per worker) is used up before the measured steps")
    p.add_argument("--steps", type=int, default=80)
    p.add_argument("--window", type=int, default=20)
    p.add_argument("--workers", type=int, default=cores(), help="DataLoader workers and feedline threads")
    p.add_argument("--amp", choices=["bf16", "none"], default="bf16")
    p.add_argument("--device", default="cuda")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checksum-batches", type=int, default=10000, help="0 skips the checksum test")
    p.add_argument("--checksum-batch-size", type=int, default=16)
    p.add_argument("--checksum-image-size", type=int, default=32)
    p.add_argument("--no-checksum-stress", dest="checksum_stress", action="store_false")
    p.add_argument("--run-timeout-s", type=float, default=150, help="cap on one training run's process")
    p.add_argument("--checksum-timeout-s", type=float, default=180)
    p.add_argument("--deadline-s", type=float, default=None,
                   help="stop starting runs after this many seconds; write what was measured")
    p.add_argument("--out-dir", default=str(ROOT / "bench" / "results"))
    p.add_argument("--dry-run", action="store_true",
                   help="CPU, tiny: resnet18 at 64 px, batch 8, a few steps, 2 workers, 20 checksum batches")
    p.add_argument("--child", choices=["train", "checksum"], help=argparse.SUPPRESS)
    p.add_argument("--child-config", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.dry_run:
        given = set(x.split("=")[0] for x in (argv if argv is not None else sys.argv[1:]))
        for flag, value in [("--models", "resnet18"), ("--image-size", 64), ("--batch-size", 8), ("--warmup", 2),
                            ("--steps", 4), ("--window", 2), ("--workers", 2), ("--device", "cpu"),
                            ("--images", 64), ("--classes", 4), ("--checksum-batches", 20),
                            ("--checksum-batch-size", 4)]:
            if flag not in given:
                setattr(a, flag[2:].replace("-", "_"), value)
    if a.warmup is None:
        a.warmup = 10 + 2 * a.workers
    return a


def shm_prefetch_factor(workers, batch_bytes):
    """torch's workers hand batches over through /dev/shm: workers x
    prefetch_factor batches live there at once. Containers often mount a
    small /dev/shm (64 MiB by default), where the workers would die with bus
    errors: use prefetch_factor 2 (torch's default) when it fits, else 1,
    else fail naming the sizes."""
    if workers == 0:
        return None
    try:
        st = os.statvfs("/dev/shm")
        free = st.f_bavail * st.f_frsize
    except OSError:
        return 2
    for factor in (2, 1):
        if workers * factor * batch_bytes * 1.25 <= free:
            return factor
    raise RuntimeError(f"/dev/shm has {free / 2**20:.0f} MiB free; torch's DataLoader needs about "
                       f"{workers * batch_bytes * 1.25 / 2**20:.0f} MiB for {workers} workers x 1 batch of "
                       f"{batch_bytes / 2**20:.0f} MiB (mount a larger /dev/shm, e.g. docker --shm-size)")


def main(argv=None):
    a = parse_args(argv)
    if a.child:
        cfg = json.loads(a.child_config)
        result = child_train(cfg) if a.child == "train" else child_checksum(cfg)
        sys.stdout.flush()
        print(RESULT_PREFIX + json.dumps(result), flush=True)
        return 0

    # An outer `timeout` sends SIGTERM: exit through the finally below so the
    # results gathered so far are still written.
    import signal

    def _terminate(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _terminate)
    t_start = time.perf_counter()
    deadline = t_start + a.deadline_s if a.deadline_s else None

    def left():
        return math.inf if deadline is None else deadline - time.perf_counter()

    def left_text():
        return "" if deadline is None else f" ({left():.0f} s left)"

    tmp_root = None
    if a.data:
        data = pathlib.Path(a.data).resolve()
        images = sum(1 for d in data.iterdir() if d.is_dir() for _ in d.iterdir())
    else:
        print(f"train_bench: generating {a.images} images in {a.classes} classes", flush=True)
        tmp_root, data = generate_dataset(a.images, a.classes)
        images = a.images
    classes = sum(1 for d in data.iterdir() if d.is_dir())
    base = {"data": str(data), "classes": classes, "batch_size": a.batch_size, "image_size": a.image_size,
            "warmup": a.warmup, "steps": a.steps, "window": a.window, "workers": a.workers, "amp": a.amp,
            "device": a.device, "seed": a.seed}
    needed = (a.warmup + a.steps) * a.batch_size
    if needed > images:
        print(f"train_bench: note: {needed} images per run over {images} in the dataset: runs cross epochs")

    now = datetime.datetime.now(datetime.timezone.utc)
    commit = os.environ.get("FEEDLINE_COMMIT", "")
    if not commit:
        try:
            commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    if not commit:  # a copy of the tree without .git: the commit prepare.sh saw
        stamp = ROOT / "bench" / "gpu" / "prefix" / "COMMIT"
        commit = f"{stamp.read_text().strip()} (when prepare.sh ran)" if stamp.exists() else "unknown commit"
    os_name = platform.platform()
    try:
        with open("/etc/os-release") as f:
            os_name = dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l).get("PRETTY_NAME", os_name).strip('"')
    except OSError:
        pass
    report = {
        "date": now.strftime("%Y-%m-%d"), "time_utc": now.strftime("%H:%M:%S"),
        "machine": {"cores": cores(), "os": os_name, "kernel": platform.release(), "python": platform.python_version(),
                    "commit": commit},
        "config": dict({k: v for k, v in base.items() if k != "data"}, dry_run=a.dry_run, dataset=str(data),
                       dataset_images=images, checksum_batches=a.checksum_batches,
                       checksum_batch_size=a.checksum_batch_size, checksum_image_size=a.checksum_image_size),
        "runs": [],
    }
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        if smi.returncode == 0 and smi.stdout.strip():
            report["machine"]["nvidia_smi"] = smi.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    ok = True
    try:
        for model in a.models.split(","):
            for loader in a.loaders.split(","):
                if left() < 30:
                    report["runs"].append({"model": model, "loader": loader, "error": "skipped: out of time"})
                    ok = False
                    continue
                print(f"train_bench: {model} fed by {loader}{left_text()}", flush=True)
                r = run_child("train", dict(base, model=model, loader=loader), min(a.run_timeout_s, left() - 5))
                r.setdefault("model", model)
                r.setdefault("loader", loader)
                report["runs"].append(r)
                if "error" in r:
                    ok = False
                else:
                    print(f"train_bench:   {r['images_per_s']:,.0f} images/s, starvation {r['starvation_pct']:.1f} %, "
                          f"{r['cpu_cores_busy']:.1f} cores busy, "
                          f"peak {mib(r['peak_pss_bytes'] or r['peak_rss_bytes'])}",
                          flush=True)
        for r in report["runs"]:
            for key in ("torch", "torchvision", "cuda", "gpu", "gpu_memory_gib", "cudnn"):
                if "env" in r and r["env"].get(key) is not None:
                    report["machine"].setdefault(key, r["env"][key])
        by = {(r["model"], r["loader"]): r for r in report["runs"] if "error" not in r}
        report["ratios"] = {m: round(by[(m, "feedline")]["images_per_s"] / by[(m, "torch")]["images_per_s"], 2)
                            for m in a.models.split(",") if (m, "feedline") in by and (m, "torch") in by}
        if a.checksum_batches > 0:
            if left() < 30:
                report["checksum"] = {"skipped": "out of time"}
                ok = False
            else:
                print(f"train_bench: device checksum test, {a.checksum_batches} batches{left_text()}", flush=True)
                ck = run_child("checksum", dict(base, checksum_batches=a.checksum_batches,
                                                checksum_batch_size=a.checksum_batch_size,
                                                checksum_image_size=a.checksum_image_size,
                                                checksum_stress=a.checksum_stress),
                               min(a.checksum_timeout_s, left() - 5))
                report["checksum"] = ck
                if "error" in ck or ck["mismatches"] != 0:
                    ok = False
                elif ck.get("device", "cpu").startswith("cuda") and not ck.get("batches_on_device_from_loader"):
                    # RELIABILITY 31 is about the device path: host copies do not count.
                    ck["error"] = "the loader did not deliver device batches: the device path was not tested"
                    ok = False
                else:
                    print(f"train_bench:   {ck['mismatches']} mismatches in {ck['batches']} batches", flush=True)
                for key in ("torch", "torchvision", "cuda", "gpu", "gpu_memory_gib", "cudnn"):
                    if ck.get("env", {}).get(key) is not None:
                        report["machine"].setdefault(key, ck["env"][key])
    finally:
        report["total_s"] = round(time.perf_counter() - t_start, 1)
        name = "gpu-dryrun-quick" if a.dry_run else f"gpu_{report['date']}"
        out_dirs = [pathlib.Path(a.out_dir)]
        if os.environ.get("OUT"):
            out_dirs.append(pathlib.Path(os.environ["OUT"]))
        text = markdown(report)
        for d in out_dirs:
            bench_results.write(name, report, text, out_dir=d)
        print(text)
        print(f"train_bench: wrote {out_dirs[0] / name}.{{json,md}} in {report['total_s']} s", flush=True)
        if tmp_root is not None:
            shutil.rmtree(tmp_root, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
