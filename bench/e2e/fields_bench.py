"""Any dataset (issue 16 "Benchmarks"): torchvision Composes and samples with
fields, feedline beside the peers, side by side in one run, same cores,
interleaved rounds, medians, ratios.

Rows:
- recipe: the ImageNet train recipe as a torchvision Compose vs feedline's
  native recipe (feedline.transforms.imagenet_train), both feedline
  threads. torchvision v2 needs torch 2: under Debian's torch 1.13 (no
  transforms.v2) the v1 Compose is run, and the results say which.
- pyop: the same Compose with one user Python op in the middle, feedline
  threads, feedline with python_workers = cores (the Python middle in worker
  processes, docs/python_ops.md) and torch DataLoader (num_workers = cores),
  same transform.
- wds: WebDataset tars of image + caption + JSON, feedline.Loader(fields=)
  vs the webdataset library (pinned, bench/e2e/requirements-webdataset.txt,
  in a venv made here with --system-site-packages) in a torch DataLoader.
  If it cannot be installed, the row carries pip's error.

Each configuration is its own process (`--worker NAME`), printing one JSON
line; results go to bench/results/fields.{json,md}.

    /usr/bin/python3 bench/e2e/fields_bench.py [--images 1000] [--repeats 3] [--quick]
"""
import datetime
import io
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tarfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
FEEDLINE = os.environ.get("FEEDLINE_BIN", str(ROOT / "build" / "tools" / "feedline"))
PYTHON = "/usr/bin/python3"
# Outside the clone (scripts/envcache.py's cache folder): a fresh clone reuses it.
WDS_VENV = pathlib.Path(os.environ.get("FEEDLINE_CACHE") or pathlib.Path.home() / ".cache" / "feedline") / "bench" / \
    "venv-webdataset"
WDS_REQ = ROOT / "bench" / "e2e" / "requirements-webdataset.txt"
sys.path.insert(0, str(ROOT))
from bench.common import results as bench_results  # noqa: E402
from bench.common import workers  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


# -- the transforms, as a user writes them ---------------------------------------------
class Grayish:
    """The user op in the middle: a cheap PIL op (blend towards grey by 10%)."""

    def __call__(self, img):
        from PIL import Image
        return Image.blend(img, img.convert("L").convert("RGB"), 0.1)


def compose(user_op=False):
    """(Compose, "v1" or "v2"): the ImageNet train recipe, torchvision v2
    where this torch has it."""
    try:
        import torch
        import torchvision.transforms.v2 as T2
        members = [T2.RandomResizedCrop(224, antialias=True), T2.RandomHorizontalFlip()]
        members += [Grayish()] if user_op else []
        members += [T2.ToImage(), T2.ToDtype(torch.float32, scale=True), T2.Normalize(MEAN, STD)]
        return T2.Compose(members), "v2"
    except ImportError:
        import torchvision.transforms as T
        members = [T.RandomResizedCrop(224), T.RandomHorizontalFlip()] + ([Grayish()] if user_op else [])
        return T.Compose(members + [T.ToTensor(), T.Normalize(MEAN, STD)]), "v1"


# -- workers: one configuration each, in its own process ---------------------------------
def worker(a):
    import torch
    cores = a.cores
    if a.worker in ("recipe/native", "recipe/compose", "pyop/feedline", "pyop/feedline-procs"):
        import feedline
        pyop = a.worker.startswith("pyop/")
        tf = feedline.transforms.imagenet_train() if a.worker == "recipe/native" else compose(user_op=pyop)[0]
        procs = cores if a.worker == "pyop/feedline-procs" else 0
        ld = feedline.Loader(a.data, batch_size=a.batch, transform=tf, shuffle=True, seed=1, drop_last=True,
                             num_threads=cores, python_workers=procs)
        out, _ = workers.timed(workers.epochs(lambda: iter(ld)), a.warmup, a.batches,
                               lambda b: b[0].shape[0])
        extra = {True: ("processes", "proc_wait_s", "proc_call_s", "proc_run_s"), False: ("gil_wait_s", "gil_held_s")}
        out["ops"] = [{k: o[k] for k in ("name", "python", "busy_s", "items") + (
            extra[bool(procs)] if o.get("python") else ())} for o in ld.stats()["ops"]]
        ld.close()
    elif a.worker == "pyop/torch":
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder
        torch.manual_seed(1)
        ld = DataLoader(ImageFolder(a.data, compose(user_op=True)[0]), batch_size=a.batch, shuffle=True,
                        num_workers=cores, drop_last=True, persistent_workers=True)
        out, _ = workers.timed(workers.epochs(lambda: iter(ld)), a.warmup, a.batches,
                               lambda b: b[0].shape[0])
    elif a.worker == "wds/feedline":
        import feedline
        ld = feedline.Loader(a.data, batch_size=a.batch, transform=feedline.transforms.imagenet_train(),
                             fields={"image": "jpg;png", "caption": "txt", "meta": "json"}, shuffle=True, seed=1,
                             drop_last=True, num_threads=cores)
        out, _ = workers.timed(workers.epochs(lambda: iter(ld)), a.warmup, a.batches,
                               lambda b: b["image"].shape[0])
        ld.close()
    elif a.worker == "wds/webdataset":
        import webdataset as wds
        from torch.utils.data import DataLoader
        tf = compose()[0]
        urls = sorted(str(p) for p in pathlib.Path(a.data).glob("*.tar"))

        def collate(samples):
            return (torch.stack([s[0] for s in samples]), [s[1] for s in samples], [s[2] for s in samples])
        ds = (wds.WebDataset(urls, shardshuffle=True, nodesplitter=wds.split_by_node).shuffle(256)
              .decode("pil").to_tuple("jpg;png", "txt", "json").map_tuple(tf, lambda t: t, lambda j: j)
              .batched(a.batch, collation_fn=collate, partial=False))
        ld = DataLoader(ds, batch_size=None, num_workers=cores, persistent_workers=True)
        out, _ = workers.timed(workers.epochs(lambda: iter(ld)), a.warmup, a.batches,
                               lambda b: b[0].shape[0])
        out["webdataset"] = wds.__version__ if hasattr(wds, "__version__") else "?"
    else:
        raise SystemExit(f"unknown worker {a.worker}")
    out["torch"] = torch.__version__
    print(json.dumps(out))


# -- data and environments -----------------------------------------------------------------
def ensure_tars(folder, shards):
    """WebDataset tars of the folder's images, each with a caption (.txt), a
    JSON record (.json) and its class (.cls), in `shards` tars."""
    out = folder.with_name(folder.name + f"-wds{shards}")
    if (out / "done").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in folder.rglob("*") if p.suffix in (".jpg", ".png"))
    tars = [tarfile.open(out / f"shard-{i:04d}.tar", "w") for i in range(shards)]

    def add(tf, name, data):
        info = tarfile.TarInfo(name)
        info.size, info.mtime = len(data), 0
        tf.addfile(info, io.BytesIO(data))
    for i, p in enumerate(files):
        tf, key, label = tars[i % shards], f"{i:08d}", int(p.parent.name.split("_")[-1])
        add(tf, f"{key}{p.suffix}", p.read_bytes())
        add(tf, f"{key}.txt", f"a photograph of class {label}, sample {i}".encode())
        add(tf, f"{key}.json", json.dumps({"id": i, "label": label, "source": p.name,
                                           "tags": ["generated", p.suffix[1:]]}).encode())
        add(tf, f"{key}.cls", str(label).encode())
    for tf in tars:
        tf.close()
    (out / "done").write_text(f"{len(files)}\n")
    return out


def webdataset_python():
    """venv-webdataset's interpreter, made once (cached by the requirements'
    contents), or (None, pip's error)."""
    py = WDS_VENV / "bin" / "python"
    stamp = WDS_VENV / ".installed"
    want = WDS_REQ.read_text()
    if stamp.exists() and stamp.read_text() == want:
        return str(py), None
    if not py.exists():
        p = subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", str(WDS_VENV)], capture_output=True,
                           text=True)
        if p.returncode != 0:
            return None, f"python3 -m venv exit {p.returncode}: {p.stderr.strip()[-600:]}"
    p = subprocess.run([str(py), "-m", "pip", "install", "-q", "-r", str(WDS_REQ)], capture_output=True, text=True,
                       env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    if p.returncode != 0:
        lines = [ln for ln in (p.stdout + p.stderr).splitlines() if "WARNING: Location" not in ln]
        return None, f"pip install -r {WDS_REQ.relative_to(ROOT)} exit {p.returncode}: " + "\n".join(lines[-15:])
    stamp.write_text(want)
    return str(py), None


def main():
    a = workers.parser(images=1000).parse_args()
    if a.worker:
        return worker(a)
    if a.quick:
        workers.quick(a)
    cores = os.cpu_count() or 1
    folder = workers.ensure_dataset(FEEDLINE, a.images)
    tars = ensure_tars(folder, max(4, cores))
    wds_py, wds_error = webdataset_python()
    configs = {"recipe/native": (PYTHON, folder), "recipe/compose": (PYTHON, folder),
               "pyop/feedline": (PYTHON, folder), "pyop/feedline-procs": (PYTHON, folder),
               "pyop/torch": (PYTHON, folder),
               "wds/feedline": (PYTHON, tars)}
    if wds_py:
        configs["wds/webdataset"] = (wds_py, tars)
    runs = {}
    for _ in range(a.repeats):  # interleaved, so drift hits all alike
        for name, (py, data) in configs.items():
            runs.setdefault(name, []).append(
                workers.run_worker(str(pathlib.Path(__file__).resolve()), py, name, data, a, cores,
                                   str(ROOT / "build" / "python")))
    table = {}
    for name, rs in runs.items():
        rates = [r["samples_per_s"] for r in rs]
        table[name] = {"samples_per_s": statistics.median(rates), "min": min(rates), "max": max(rates),
                       "first_batch_s": statistics.median(r["first_batch_s"] for r in rs), "runs": rs}
    if wds_error:
        table["wds/webdataset"] = {"samples_per_s": None, "error": wds_error}
    version = compose()[1]
    torch_version = runs["recipe/compose"][0]["torch"]

    def ratio(x, y):
        n, d = table[x]["samples_per_s"], table[y]["samples_per_s"]
        return n / d if n and d else None
    ratios = {f"recipe: torchvision {version} Compose / native recipe (feedline, target >= 0.95)":
              ratio("recipe/compose", "recipe/native"),
              "pyop: feedline threads / torch DataLoader (same Compose + user op)":
              ratio("pyop/feedline", "pyop/torch"),
              "pyop: feedline, python_workers=cores / torch DataLoader (same Compose + user op)":
              ratio("pyop/feedline-procs", "pyop/torch"),
              "pyop: feedline, python_workers=cores / feedline threads": ratio("pyop/feedline-procs", "pyop/feedline"),
              "wds: feedline fields= / webdataset + DataLoader": ratio("wds/feedline", "wds/webdataset")}
    held = [o for o in runs["pyop/feedline"][-1].get("ops", []) if o.get("python")]
    in_procs = [o for o in runs["pyop/feedline-procs"][-1].get("ops", []) if o.get("python")]
    meta = {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {cores} cores",
            "dataset": f"{a.images} generated ImageNet-like images ({folder.name}); tars: {tars.name}",
            "batch": a.batch, "repeats": a.repeats, "torch": torch_version, "compose": version,
            "compose_note": ("torchvision v2 Compose" if version == "v2" else
                             f"torchvision v1 Compose under torch {torch_version} (no transforms.v2 in this "
                             "torchvision; the v2 row needs the torch 2 venv)")}
    lines = ["# Any dataset: Composes, Python ops and fields (issue 16)", "",
             f"{meta['date']}, {meta['machine']}, {meta['dataset']}, batch {a.batch}, median of {a.repeats} "
             f"(spread min-max), {meta['compose_note']}.", ""]
    lines += workers.rate_rows(table, lambda e: "not run | " + e.splitlines()[0])
    lines += [""] + workers.ratio_rows(ratios)
    for o in held:
        lines.append(f"\npyop/feedline's Python op {o['name']}: {o['items']} calls, GIL held {o['gil_held_s']:.2f} s, "
                     f"waited {o['gil_wait_s']:.2f} s, busy {o['busy_s']:.2f} s (last run).")
    for o in in_procs:
        lines.append(f"\npyop/feedline-procs's Python op {o['name']}: {o['items']} calls in {o['processes']} "
                     f"worker processes, run {o['proc_run_s']:.2f} s there, round trips {o['proc_call_s']:.2f} s, "
                     f"waited for a free worker {o['proc_wait_s']:.2f} s (last run).")
    if wds_error:
        lines += ["", "webdataset could not be installed:", "", "```", wds_error, "```"]
    text = "\n".join(lines) + "\n"
    print(text)
    bench_results.write("fields", {"meta": meta, "results": table, "ratios": ratios}, text, quick=a.quick)


if __name__ == "__main__":
    main()
