"""How close the doctor's predictions come (issue 12): each planted
bottleneck of tests/python/test_doctor_scenarios.py is diagnosed, the fix the
doctor recommends is applied, and the fixed loop is measured again under the
doctor. Reported per scenario: the rate measured before, the predicted rate,
the rate measured after the fix, and the prediction's error
(measured / predicted - 1). Medians of --repeats; the tests check that each
prediction exists, points the right way and follows from its evidence; its
accuracy is this benchmark's business, since a busy machine moves it.

Results: bench/results/doctor.{md,json} (doctor-quick.* with --quick).

    /usr/bin/python3 bench/e2e/doctor_bench.py [--repeats 3] [--quick] [--only transform_bound,...]
"""
import argparse
import datetime
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from PIL import Image
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder

import feedline

ROOT = pathlib.Path(__file__).resolve().parents[2]
FEEDLINE = os.environ.get("FEEDLINE_BIN", str(ROOT / "build" / "tools" / "feedline"))


sys.path.insert(0, str(ROOT))
from bench.common import results as bench_results  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "python"))
from doctor_plants import Blurish, ColorJitterish, SetUpConnection, SlowAugment, SlowCollate, SlowStorage, tf  # noqa: E402


# -- data --------------------------------------------------------------------------
def resized_copy(src, dst, short=None, long=None):
    for p in sorted(pathlib.Path(src).rglob("*")):
        if p.is_file():
            q = (pathlib.Path(dst) / p.relative_to(src)).with_suffix(".jpg")
            q.parent.mkdir(parents=True, exist_ok=True)
            with Image.open(p) as im:
                im = im.convert("RGB")
                w, h = im.size
                s = short / min(w, h) if short else long / max(w, h)
                im.resize((max(1, round(w * s)), max(1, round(h * s))), Image.BILINEAR).save(q, quality=90)
    return pathlib.Path(dst)


def make_data(tmp):
    """The test suite's two datasets: 256 photographs at 72 px (small) and
    24 at 1600 px on the long side (large)."""
    out = {}
    for name, images, classes, size in (("small", 256, 4, {"short": 72}), ("large", 24, 2, {"long": 1600})):
        raw = tmp / f"raw-{name}"
        subprocess.run([FEEDLINE, "gen-dataset", str(raw), "--images", str(images), "--classes", str(classes),
                        "--photos", str(ROOT / "tests" / "data" / "photos")], check=True, capture_output=True)
        out[name] = resized_copy(raw, tmp / name, **size)
    return out


# -- running -------------------------------------------------------------------------
def diagnose(loader, step_s=0.0, epochs=1):
    with feedline.doctor.Doctor() as doctor:
        for _ in range(epochs):
            for _batch in doctor.watch(loader):
                time.sleep(step_s)
        return doctor.report(file=None)


def steady(report):
    return report.data["loop"]["steady_samples_per_s"]


def later_epochs(report):
    epochs = report.data["loop"]["epoch_list"][1:]
    return sum(e["samples"] for e in epochs) / sum(e["wall_s"] for e in epochs)


# Each scenario: (planted() -> Report, fixed(finding) -> measured samples/s).
def scenarios(data, tmp):
    small, large = data["small"], data["large"]

    def transform_bound():
        def planted():
            ds = ImageFolder(small, transform=tf(SlowAugment(0.008)))
            return diagnose(DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True), 0.010)

        def fixed(top):
            ds = ImageFolder(small, transform=tf())
            return steady(diagnose(DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True), 0.010))
        return planted, fixed

    def decode_bound():
        def planted():
            ds = ImageFolder(large, transform=tf())
            return diagnose(DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True), 0.010)

        def fixed(top):
            short = top["evidence"]["suggested_short_side"]
            root = tmp / f"stored-at-{short}"
            if not root.exists():
                resized_copy(large, root, short=short)
            ds = ImageFolder(root, transform=tf())
            return steady(diagnose(DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True), 0.010))
        return planted, fixed

    def num_workers_zero():
        ds = ImageFolder(small, transform=tf())

        def planted():
            return diagnose(DataLoader(ds, batch_size=32, num_workers=0), 0.015)

        def fixed(top):
            k = top["evidence"]["recommended_workers"]
            return steady(diagnose(DataLoader(ds, batch_size=32, num_workers=k, persistent_workers=True), 0.015))
        return planted, fixed

    def too_few_workers():
        ds = ImageFolder(small, transform=tf(ColorJitterish(0.001), Blurish(0.001)), loader=SlowStorage(0.001))

        def planted():
            return diagnose(DataLoader(ds, batch_size=8, num_workers=1, persistent_workers=True), 0.004)

        def fixed(top):
            k = top["evidence"]["recommended_workers"]
            return steady(diagnose(DataLoader(ds, batch_size=8, num_workers=k, persistent_workers=True), 0.004))
        return planted, fixed

    def storage_bound():
        def planted():
            ds = ImageFolder(small, transform=tf(), loader=SlowStorage(0.006))
            return diagnose(DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True), 0.006)

        def fixed(top):
            ds = ImageFolder(small, transform=tf())
            return steady(diagnose(DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True), 0.006))
        return planted, fixed

    def batch_too_small():
        # Four passes per epoch, so that large batches still make an epoch
        # much longer than the batches in flight.
        ds = torch.utils.data.ConcatDataset([ImageFolder(small, transform=tf(), loader=SlowStorage(0.002))] * 4)

        def planted():
            return diagnose(DataLoader(torch.utils.data.Subset(ds, range(256)), batch_size=1, num_workers=4,
                                       persistent_workers=True))

        def fixed(top):
            b = top["evidence"]["recommended_batch_size"]
            return steady(diagnose(DataLoader(ds, batch_size=b, num_workers=4, persistent_workers=True)))
        return planted, fixed

    def collate_bound():
        ds = ImageFolder(small, transform=tf())

        def planted():
            return diagnose(DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True,
                                       collate_fn=SlowCollate(0.025)), 0.006)

        def fixed(top):
            return steady(diagnose(DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True), 0.006))
        return planted, fixed

    def persistent_workers():
        subset = torch.utils.data.Subset(ImageFolder(small, transform=tf()), range(96))
        init = SetUpConnection(0.3)

        def planted():
            return diagnose(DataLoader(subset, batch_size=8, num_workers=2, worker_init_fn=init), 0.005, epochs=2)

        def fixed(top):
            loader = DataLoader(subset, batch_size=8, num_workers=2, worker_init_fn=init, persistent_workers=True)
            return later_epochs(diagnose(loader, 0.005, epochs=3))  # epochs after the first
        return planted, fixed

    return {f.__name__: f for f in (transform_bound, decode_bound, num_workers_zero, too_few_workers,
                                    storage_bound, batch_too_small, collate_bound, persistent_workers)}


def run_one(name, make):
    planted, fixed = make()
    report = planted()
    top = report.findings[0]
    row = {"expected": name, "named": top["id"], "before": steady(report) or report.data["loop"]["samples_per_s"],
           "predicted": top["predicted_samples_per_s"]}
    if top["id"] != name or not top["predicted_samples_per_s"]:
        row.update(measured=None, error=None)
        return row
    row["measured"] = fixed(top)
    row["error"] = row["measured"] / row["predicted"] - 1
    return row


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="one repeat (the make test smoke run)")
    p.add_argument("--only", default="", help="comma-separated scenario names")
    a = p.parse_args()
    repeats = 1 if a.quick else a.repeats
    results = {}
    with tempfile.TemporaryDirectory(prefix="doctor-bench-") as t:
        tmp = pathlib.Path(t)
        table = scenarios(make_data(tmp), tmp)
        names = [n for n in table if not a.only or n in a.only.split(",")]
        for name in names:
            rows = []
            for _ in range(repeats):
                r = run_one(name, table[name])
                rows.append(r)
                err = f"{100 * r['error']:+.0f}%" if r["error"] is not None else "n/a"
                print(f"{name}: named {r['named']}, before {r['before']:.0f}, predicted "
                      f"{r['predicted'] or 0:.0f}, measured {r['measured'] or 0:.0f} samples/s ({err})", flush=True)
            errors = [r["error"] for r in rows if r["error"] is not None]
            results[name] = {
                "named_first": sum(r["named"] == name for r in rows), "repeats": repeats,
                "predicted": statistics.median(r["predicted"] for r in rows if r["predicted"]) if errors else None,
                "measured": statistics.median(r["measured"] for r in rows if r["measured"]) if errors else None,
                "error_median": statistics.median(errors) if errors else None,
                "error_max_abs": max(abs(e) for e in errors) if errors else None, "runs": rows}
    meta = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores", "repeats": repeats,
            "load_avg_1min": os.getloadavg()[0], "python": sys.version.split()[0]}
    lines = ["# The doctor's predictions against re-measurement", "",
             f"{meta['date']}, {meta['machine']}, load average {meta['load_avg_1min']:.1f} at the end, "
             f"median of {repeats}. Error: measured after the fix / predicted - 1.", "",
             "| scenario | named first | measured before | predicted | measured after fix | error (median) | "
             "worst abs error |", "|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        before = statistics.median(x["before"] for x in r["runs"])
        fmt = lambda v, f="{:.0f}": f.format(v) if v is not None else "n/a"  # noqa: E731
        lines.append(f"| {name} | {r['named_first']}/{r['repeats']} | {before:.0f} | {fmt(r['predicted'])} | "
                     f"{fmt(r['measured'])} | {fmt(r['error_median'] and 100 * r['error_median'], '{:+.0f}%')} | "
                     f"{fmt(r['error_max_abs'] and 100 * r['error_max_abs'], '{:.0f}%')} |")
    bench_results.write("doctor", {"meta": meta, "results": results}, "\n".join(lines) + "\n", quick=a.quick)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
