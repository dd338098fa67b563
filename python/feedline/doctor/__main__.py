"""python3 -m feedline.doctor DATA [options] (also `feedline doctor DATA`),
or python3 -m feedline.doctor --trace TRACE.json [--json P] [--html P].

Runs the feedline pipeline alone over DATA at several thread counts and
reports per-stage costs, the bottleneck, the scaling curve and the highest
sample rate it can feed; with --target-rate N, whether it can keep an
accelerator consuming N samples/s busy, and with how many cores.

With --trace and no DATA, reads a torch.profiler trace the user saved
(prof.export_chrome_trace) and reports what is inside its steps (the step
findings of Doctor(profile_steps=N), offline).
"""
import argparse
import json
import sys
from typing import Any, Callable, Optional, Sequence

from ._report import Report
from .pipeline import scan


def _threads(text: str) -> list[int]:
    try:
        out = [int(t) for t in text.split(",") if t.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--threads takes a comma-separated list of integers, got {text!r}") from e
    if not out or any(t < 1 for t in out):
        raise argparse.ArgumentTypeError(f"--threads needs integers >= 1, got {text!r}")
    return out


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        v = kind(text)
        if v <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return v
    return parse


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(
        prog="feedline doctor",
        description="Measure the feedline input pipeline alone on DATA: per-stage costs, the bottleneck, "
                    "scaling with threads, and the highest rate it can feed.")
    p.add_argument("data", nargs="?",
                   help="an ImageFolder tree, a packed dataset (feedline pack), WebDataset tars or a URL")
    p.add_argument("--batch-size", type=_positive(int), default=64)
    p.add_argument("--threads", type=_threads, default=None,
                   help="thread counts to measure, e.g. 1,2,4 (default: 1 and every power of two up to the cores)")
    p.add_argument("--transform", choices=("train", "eval"), default="train",
                   help="the ImageNet training (random resized crop + flip) or evaluation recipe")
    p.add_argument("--size", type=_positive(int), default=224, help="output image size")
    p.add_argument("--batches", type=_positive(int), default=20, help="batches timed per thread count")
    p.add_argument("--warmup", type=int, default=2, help="batches not timed at the start of each run")
    p.add_argument("--target-rate", type=_positive(float), default=None,
                   help="samples/s an accelerator consumes: can the pipeline keep it busy, with how many cores?")
    p.add_argument("--json", metavar="PATH", help="write the JSON report")
    p.add_argument("--html", metavar="PATH", help="write the self-contained HTML report")
    p.add_argument("--trace", metavar="PATH",
                   help="with DATA: write a Chrome/Perfetto trace of the scan; without DATA: read a torch.profiler "
                        "trace (prof.export_chrome_trace) and report on the steps inside it")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    a = p.parse_args(argv)
    if a.data is None:
        if not a.trace:
            p.error("give DATA (a dataset to scan) or --trace TRACE.json (a torch.profiler trace to read)")
        return _read_trace(a.trace, a.json, a.html)
    if a.threads is None:
        from ._report import available_cores
        cores = available_cores()
        a.threads = sorted({1, cores} | {1 << i for i in range(8) if (1 << i) <= cores})
    progress = None if a.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    try:
        ev = scan(a.data, a.threads, a.batch_size, a.transform, a.size, a.batches, a.warmup, a.target_rate,
                  progress)
    except (FileNotFoundError, ValueError) as e:
        print(f"feedline doctor: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # feedline.Error and friends: the message names file and reason
        print(f"feedline doctor: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    r = Report(ev)
    print(r.summary())
    if a.json:
        r.save_json(a.json)
    if a.html:
        r.save_html(a.html)
    if a.trace:
        with open(a.trace, "w") as f:
            json.dump(r.trace(), f)
    return 0


def _read_trace(path: str, json_path: Optional[str], html_path: Optional[str]) -> int:
    from ._report import trace_report
    try:
        r = trace_report(path)
    except FileNotFoundError as e:
        print(f"feedline doctor: {path}: {e.strerror}", file=sys.stderr)
        return 2
    except ValueError as e:  # names the file and what is wrong with it
        print(f"feedline doctor: {e}", file=sys.stderr)
        return 2
    print(r.summary())
    if json_path:
        r.save_json(json_path)
    if html_path:
        r.save_html(html_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
