"""What the end-to-end benchmarks that run each configuration in its own
process share: the timed loop a worker runs over a loader, the generated
dataset, the worker's command line and the arguments both sides parse.

A benchmark script is its own worker: `SCRIPT --worker NAME --data DIR ...`
runs one configuration and prints one JSON line; without --worker it runs
every configuration in interleaved rounds through run_worker."""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import time
from typing import Any, Callable, Dict, Iterable, Iterator, Optional, Tuple

ROOT = pathlib.Path(__file__).resolve().parents[2]


def timed(batches: Iterable[Any], warmup: int, n: int, count: Callable[[Any], int]) -> Tuple[Dict[str, Any], Any]:
    """Times batches warmup+1 .. warmup+n of `batches` (count(b): samples in
    a batch). Returns (samples, seconds, samples_per_s, first_batch_s) and
    the last batch."""
    got, samples, t0, first, b = 0, 0, None, None, None
    start = time.perf_counter()
    for b in batches:
        if first is None:
            first = time.perf_counter() - start
        got += 1
        if got == warmup:
            t0 = time.perf_counter()
        elif got > warmup:
            samples += count(b)
        if got == warmup + n:
            break
    if t0 is None or samples == 0:
        raise RuntimeError(f"only {got} batches: the dataset is too small for warmup {warmup} + {n}")
    s = time.perf_counter() - t0
    return ({"samples": samples, "seconds": round(s, 4), "samples_per_s": round(samples / s, 1),
             "first_batch_s": round(first or 0.0, 4)}, b)


def epochs(make: Callable[[], Iterator[Any]]) -> Iterator[Any]:
    """Epoch after epoch of make()'s iterator, without end."""
    while True:
        yield from make()


def ensure_dataset(feedline_bin: str, images: int, classes: int = 10) -> pathlib.Path:
    """bench/data/imagenet-like-IMAGES, generated once."""
    path = ROOT / "bench" / "data" / f"imagenet-like-{images}"
    if not (path / "class_0000").exists():
        subprocess.run([feedline_bin, "gen-dataset", str(path), "--images", str(images), "--classes", str(classes)],
                       check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return path


def parser(images: int = 1000) -> argparse.ArgumentParser:
    """The arguments of the driver and of its workers."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=images)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="CI smoke: tiny dataset, one repeat")
    ap.add_argument("--worker")
    ap.add_argument("--data")
    ap.add_argument("--cores", type=int, default=os.cpu_count())
    return ap


def quick(a: argparse.Namespace) -> None:
    """The CI smoke's sizes."""
    a.images, a.repeats, a.batches, a.batch, a.warmup = 200, 1, 2, 16, 1


def run_worker(script: str, python: str, name: str, data: Any, a: argparse.Namespace, cores: int,
               pythonpath: str, raise_on_error: bool = True) -> Dict[str, Any]:
    """Runs configuration `name` of `script` under `python` and returns its
    JSON line; a failure raises (or, raise_on_error=False, is returned as
    {"error": its stderr's tail})."""
    cmd = [python, script, "--worker", name, "--data", str(data), "--batch", str(a.batch), "--batches",
           str(a.batches), "--warmup", str(a.warmup), "--cores", str(cores)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=pythonpath), timeout=900)
    if p.returncode != 0:
        text = f"{name} failed ({p.returncode}): {p.stderr.strip()[-2000:]}"
        if raise_on_error:
            raise RuntimeError(text)
        return {"error": text}
    out: Optional[Dict[str, Any]] = json.loads(p.stdout.strip().splitlines()[-1])
    assert out is not None
    return out


def median_table(runs: Dict[str, list], rate: str, medians: Iterable[str] = (),
                 firsts: Iterable[str] = ()) -> Dict[str, Dict[str, Any]]:
    """Per configuration of interleaved runs: the median of `rate` with its
    min and max, the medians of `medians`, the first run's `firsts`, and
    how many runs failed ({rate: None, "error": ...} when all did)."""
    medians, firsts = list(medians), list(firsts)
    table: Dict[str, Dict[str, Any]] = {}
    for name, rs in runs.items():
        ok = [r for r in rs if "error" not in r]
        if not ok:
            table[name] = {rate: None, "error": rs[-1]["error"]}
            continue
        rates = [r[rate] for r in ok]
        row: Dict[str, Any] = {rate: statistics.median(rates), "min": min(rates), "max": max(rates)}
        row.update({k: statistics.median(r[k] for r in ok) for k in medians})
        row.update({k: ok[0][k] for k in firsts})
        row.update(failed_runs=len(rs) - len(ok), runs=rs)
        table[name] = row
    return table


def rate_rows(table: Dict[str, Dict[str, Any]], error_cell: Callable[[str], str]) -> list:
    """The markdown rows of a configuration table (samples/s, spread, first
    batch); a configuration with an "error" gets error_cell(its text)."""
    lines = ["| configuration | samples/s | spread | first batch |", "|---|---|---|---|"]
    for name, r in table.items():
        if r.get("error"):
            lines.append(f"| {name} | {error_cell(r['error'])} | |")
        else:
            lines.append(f"| {name} | {r['samples_per_s']:.0f} | {r['min']:.0f}-{r['max']:.0f} | "
                         f"{r['first_batch_s']:.2f} s |")
    return lines


def ratio_rows(ratios: Dict[str, Optional[float]]) -> list:
    """The markdown rows of a ratio table ("-" where a side is missing)."""
    return ["| ratio | value |", "|---|---|"] + [f"| {k} | {'-' if v is None else f'{v:.2f}x'} |"
                                                  for k, v in ratios.items()]
