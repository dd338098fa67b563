"""Start-up: how long a data set takes to open, against torchvision's scan.

Set-up (cached under bench/data/): an ImageFolder of --files hard links of
the real photos in tests/data/photos (1,000 classes, as ImageNet), and a
packed dataset of --records tiny records (~1,000 per shard, `feedline
pack` from a list file). Each figure is measured in a fresh process (page
cache warm, nothing cached in-process, imports excluded), interleaved over
--repeats, medians:

- torchvision `ImageFolder(root)`: the scan a torch user waits for;
- `feedline.Loader(root)` construction (list, classes, pipeline, threads),
  and the time from there to the first batch;
- `feedline.RecordLoader(packed)` construction (manifest, every shard's
  header, footer and index) and its first batch.

    /usr/bin/python3 bench/e2e/startup_bench.py [--files 200000] [--records 1000000] [--repeats 3] [--quick]

`--files 1000000` is the 1M-file target. `--python-path` picks the build
whose Python package is measured (default build/python), so a run over
another checkout's build gives the "before" figures. Results in
bench/results/startup.{json,md}.
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

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.common import results as bench_results  # noqa: E402

FEEDLINE = os.environ.get("FEEDLINE_BIN", str(ROOT / "build" / "tools" / "feedline"))
PHOTOS = ROOT / "tests" / "data" / "photos"
PYTHON = sys.executable

# Each measurement runs in its own interpreter: imports first (not timed),
# then the one call, printed as JSON on the last line.
TORCHVISION = """
import json, sys, time
import torchvision
t = time.perf_counter()
d = torchvision.datasets.ImageFolder(sys.argv[1])
print(json.dumps({"open_s": time.perf_counter() - t, "samples": len(d)}))
"""
FEEDLINE_OPEN = """
import json, sys, time
import feedline
kind, path, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
cls = feedline.Loader if kind == "folder" else feedline.RecordLoader
t = time.perf_counter()
loader = cls(path, batch_size=batch)
t1 = time.perf_counter()
first = next(iter(loader))
t2 = time.perf_counter()
print(json.dumps({"open_s": t1 - t, "first_batch_s": t2 - t1, "batches": len(loader)}))
"""


# ext4 allows 65,000 links to one inode: each photo is copied once per
# this many links (a handful of copies for 1M files), never once per file.
LINKS_PER_SEED = 30000


def build_folder(out, files, classes):
    """`files` hard links of the photos, round robin, in `classes` class
    folders; built under a .partial name. The links point at copies of the
    photos beside it (OUT.seeds, one per LINKS_PER_SEED links),
    so the tracked files' link counts stay as they are."""
    if out.exists():
        return
    photos = sorted(p for p in PHOTOS.iterdir() if p.suffix in (".jpg", ".png"))
    seeds_dir = out.with_name(out.name + ".seeds")  # its own: two folders never share a seed
    seeds_dir.mkdir(parents=True, exist_ok=True)

    def seed(k, n):
        path = seeds_dir / f"{n:04d}-{photos[k].name}"
        if not path.exists():
            path.write_bytes(photos[k].read_bytes())
        return path

    tmp = out.with_name(out.name + ".partial")
    if tmp.exists():
        subprocess.run(["rm", "-rf", str(tmp)], check=True)
    for c in range(classes):
        (tmp / f"n{c:08d}").mkdir(parents=True)
    for i in range(files):
        k = i % len(photos)
        src = seed(k, i // len(photos) // LINKS_PER_SEED)
        os.link(src, tmp / f"n{i % classes:08d}" / f"img_{i:08d}{src.suffix}")  # fails loudly; never copies
    tmp.rename(out)


def build_packed(out, records):
    """A packed dataset of `records` tiny records, ~1,000 per shard."""
    if (out / "manifest.json").exists():
        return
    tiny = out.with_name(out.name + "-inputs")
    tiny.mkdir(parents=True, exist_ok=True)
    sizes = [200 + 13 * k for k in range(8)]
    for k, n in enumerate(sizes):
        (tiny / f"t{k}.bin").write_bytes(bytes((k * 31 + b) % 256 for b in range(n)))
    listing = tiny / "list.csv"
    with open(listing, "w") as f:
        for i in range(records):
            f.write(f"{tiny / f't{i % 8}.bin'},{i % 1000},r{i:08d}\n")
    per_record = sum(sizes) / len(sizes)
    subprocess.run([FEEDLINE, "pack", str(listing), str(out), "--overwrite", "--shard-bytes",
                    str(int(1000 * per_record))], check=True, capture_output=True)


def run_json(code, args, python_path):
    env = dict(os.environ, PYTHONPATH=str(python_path))
    out = subprocess.run([PYTHON, "-c", code, *map(str, args)], check=True, capture_output=True, text=True,
                         env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=200000)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--records", type=int, default=1000000)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--python-path", default=str(ROOT / "build" / "python"))
    ap.add_argument("--out-name", default="startup")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.files, a.classes, a.records, a.repeats = 2000, 20, 20000, 1
    data = ROOT / "bench" / "data"
    data.mkdir(parents=True, exist_ok=True)
    folder = data / f"startup-folder-{a.files}-{a.classes}"
    packed = data / f"startup-packed-{a.records}"
    build_folder(folder, a.files, a.classes)
    build_packed(packed, a.records)
    shards = len(json.loads((packed / "manifest.json").read_text())["shards"])

    runs = {"torchvision": [], "folder": [], "packed": []}
    for _ in range(a.repeats):  # interleaved: drift in the machine's load hits every column alike
        runs["torchvision"].append(run_json(TORCHVISION, [folder], a.python_path))
        runs["folder"].append(run_json(FEEDLINE_OPEN, ["folder", folder, a.batch_size], a.python_path))
        runs["packed"].append(run_json(FEEDLINE_OPEN, ["packed", packed, a.batch_size], a.python_path))

    def med(name, key):
        return statistics.median(r[key] for r in runs[name])

    def spread(name, key):
        return min(r[key] for r in runs[name]), max(r[key] for r in runs[name])

    rows = {
        "torchvision ImageFolder(root) scan": ("torchvision", "open_s"),
        "feedline.Loader(root) open": ("folder", "open_s"),
        "feedline.Loader(root) first batch after open": ("folder", "first_batch_s"),
        "feedline.RecordLoader(packed) open": ("packed", "open_s"),
        "feedline.RecordLoader(packed) first batch after open": ("packed", "first_batch_s"),
    }
    figures = {label: {"median_s": med(*k), "min_s": spread(*k)[0], "max_s": spread(*k)[1]}
               for label, k in rows.items()}
    ratios = {"feedline open / torchvision scan": med("folder", "open_s") / med("torchvision", "open_s")}
    targets = {
        "folder open <= torchvision scan": med("folder", "open_s") <= med("torchvision", "open_s"),
        "first batch <= 0.2 s after open": med("folder", "first_batch_s") <= 0.2,
        "packed open < 1 s": med("packed", "open_s") < 1.0,
    }
    cores = os.cpu_count()
    meta = {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {cores} cores",
            "files": a.files, "classes": a.classes, "records": a.records, "shards": shards,
            "batch_size": a.batch_size, "repeats": a.repeats, "python_path": a.python_path}
    lines = ["# Start-up: opening a data set", "",
             f"{meta['date']}, {meta['machine']}, page-cached, a fresh process per figure (imports excluded), "
             f"median of {a.repeats}.", "",
             f"ImageFolder: {a.files} hard links of tests/data/photos in {a.classes} classes. Packed: "
             f"{a.records} records in {shards} shards. First batch: batch_size={a.batch_size}, default "
             "transform (decode + RandomResizedCrop).", "",
             "| step | median (s) | spread (s) |", "|---|---|---|"]
    for label, f in figures.items():
        lines.append(f"| {label} | {f['median_s']:.3f} | {f['min_s']:.3f}-{f['max_s']:.3f} |")
    lines += ["", "| ratio | value |", "|---|---|"] + [f"| {k} | {v:.2f}x |" for k, v in ratios.items()]
    lines += ["", "| target (issue 15) | met |", "|---|---|"] + [
        f"| {k} | {'yes' if v else 'no'} |" for k, v in targets.items()]
    text = "\n".join(lines) + "\n"
    print(text)
    bench_results.write(a.out_name, {"meta": meta, "runs": runs, "figures": figures, "ratios": ratios,
                                     "targets": targets}, text, quick=a.quick)


if __name__ == "__main__":
    main()
