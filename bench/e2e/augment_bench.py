"""Modern augmentation recipes (issue 17 "Benchmarks"): feedline vs torch's
DataLoader + torchvision v2, side by side in one run, same cores,
interleaved rounds, medians, ratios.

Recipes, written once as torchvision v2 Composes (the same objects feed
both loaders; feedline translates them natively):
- resnet50-new: the reference scripts' "new recipe" train pipeline:
  RandomResizedCrop(176), RandomHorizontalFlip, TrivialAugmentWide,
  PILToTensor, ToDtype(float32, scale), Normalize, RandomErasing(0.1);
  per batch, RandomChoice([MixUp(alpha=0.2), CutMix(alpha=1.0)]).
- timm-like: RandomResizedCrop(224), RandomHorizontalFlip, RandAugment(2, 9),
  PILToTensor, ToDtype(float32, scale), Normalize, RandomErasing(0.25).

feedline: feedline.Loader(folder, transform=compose, batch_transform=mix,
num_threads=cores). torch: DataLoader(ImageFolder(folder, compose),
num_workers=cores, persistent_workers=True) with the mix in its collate_fn,
as the reference scripts do. DALI (CPU, device_id=None, num_threads=cores,
its venv from bench/peers/envs.py): the same recipes from its own operators,
decoders.image_random_crop, resize, flip, its auto_aug policies
(rand_augment, trivial_augment_wide; enable_conditionals), normalise and
fn.erase under a coin with torchvision's area and aspect draws; DALI has no
MixUp or CutMix, so its worker applies them to each batch in numpy
(torchvision v2's arithmetic: Beta draws, the batch rolled by one, one-hot
labels mixed). Its policies are DALI's (its own magnitudes and op set), so
the row compares loaders doing the same kind of work, not the same bytes.

Needs torchvision >= 0.16 (transforms.v2 with MixUp/CutMix): it runs under
the torch 2 venv of `make test-torch2` (in the cache, scripts/envcache.py; feedline from
build-torch2/python). Each configuration is its own process (`--worker
NAME`) printing one JSON line; results go to bench/results/augment.{json,md}.

    <torch2 venv>/bin/python bench/e2e/augment_bench.py [--images 1000] [--repeats 3] [--quick]
"""
import datetime
import json
import os
import pathlib
import platform
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
FEEDLINE = os.environ.get("FEEDLINE_BIN", str(ROOT / "build-torch2" / "tools" / "feedline"))
PYTHONPATH = os.environ.get("FEEDLINE_PYTHONPATH", str(ROOT / "build-torch2" / "python"))
sys.path.insert(0, str(ROOT))
from bench.common import results as bench_results  # noqa: E402
from bench.common import workers  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
NUM_CLASSES = 10
RECIPES = ("resnet50-new", "timm-like")


def recipe(name):
    """(per-sample Compose, per-batch mix or None) of a recipe, torchvision v2."""
    import torch
    import torchvision.transforms.v2 as T
    tail = [T.PILToTensor(), T.ToDtype(torch.float32, scale=True), T.Normalize(MEAN, STD)]
    if name == "resnet50-new":
        members = [T.RandomResizedCrop(176, antialias=True), T.RandomHorizontalFlip(), T.TrivialAugmentWide()]
        members += tail + [T.RandomErasing(0.1)]
        mix = T.RandomChoice([T.MixUp(alpha=0.2, num_classes=NUM_CLASSES),
                              T.CutMix(alpha=1.0, num_classes=NUM_CLASSES)])
        return T.Compose(members), mix
    if name == "timm-like":
        members = [T.RandomResizedCrop(224, antialias=True), T.RandomHorizontalFlip(), T.RandAugment(2, 9)]
        return T.Compose(members + tail + [T.RandomErasing(0.25)]), None
    raise SystemExit(f"unknown recipe {name}")


def dali_worker(a, name):
    """DALI's CPU pipeline for recipe `name` (see the module's docstring); no torch here."""
    import math

    import numpy as np
    import nvidia.dali as dali
    import nvidia.dali.fn as fn
    import nvidia.dali.math as dmath
    import nvidia.dali.types as types
    from nvidia.dali import pipeline_def
    from nvidia.dali.auto_aug import rand_augment, trivial_augment

    root = pathlib.Path(a.data)
    classes = sorted(d.name for d in root.iterdir() if d.is_dir())
    files, labels = [], []
    for i, c in enumerate(classes):
        for f in sorted((root / c).iterdir()):
            files.append(str(f))
            labels.append(i)
    size, erase_p = (176, 0.1) if name == "resnet50-new" else (224, 0.25)

    @pipeline_def(batch_size=a.batch, num_threads=a.cores, device_id=None, seed=1, prefetch_queue_depth=2,
                  enable_conditionals=True)
    def pipe():
        jpegs, lab = fn.readers.file(files=files, labels=labels, random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                               random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3],
                                               num_attempts=10)
        images = fn.resize(images, resize_x=size, resize_y=size, antialias=True)
        images = fn.flip(images, horizontal=fn.random.coin_flip(probability=0.5))
        shape = fn.shapes(images)
        if name == "resnet50-new":
            images = trivial_augment.trivial_augment_wide(images, shape=shape)
        else:
            images = rand_augment.rand_augment(images, n=2, m=9, shape=shape)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                          mean=[255 * m for m in MEAN], std=[255 * s for s in STD])
        # RandomErasing's get_params: an area in scale * H * W and a log-uniform aspect ratio (one try).
        area = fn.random.uniform(range=[0.02, 0.33])
        aspect = dmath.exp(fn.random.uniform(range=[math.log(0.3), math.log(3.3)]))
        h, w = dmath.min(dmath.sqrt(area * aspect), 0.99), dmath.min(dmath.sqrt(area / aspect), 0.99)
        anchor = fn.stack(fn.random.uniform(range=[0.0, 1.0]) * (1.0 - h),
                          fn.random.uniform(range=[0.0, 1.0]) * (1.0 - w))
        if fn.random.coin_flip(probability=erase_p):
            images = fn.erase(images, anchor=anchor, shape=fn.stack(h, w), axis_names="HW", normalized=True,
                              fill_value=0.0)
        return images, lab

    p = pipe()
    p.build()
    rng = np.random.default_rng(1)
    steps = len(files) // a.batch
    erased = [0, 0]  # images with an erased (exactly 0.0 after Normalize) value, images seen

    def mixed():
        """One epoch of (images, labels); resnet50-new: MixUp(0.2) or CutMix(1.0) per batch, as v2 does."""
        for _ in range(steps):
            out_images, out_labels = p.run()
            x = np.stack([np.asarray(t) for t in out_images])
            erased[0] += int(np.any(x == 0, axis=(1, 2, 3)).sum())  # no pixel normalises to exactly 0 otherwise
            erased[1] += x.shape[0]
            y = np.asarray([int(np.asarray(t).reshape(-1)[0]) for t in out_labels])
            if name == "resnet50-new":
                y = np.eye(NUM_CLASSES, dtype=np.float32)[y]
                if rng.random() < 0.5:  # MixUp
                    lam = np.float32(rng.beta(0.2, 0.2))
                    x = lam * x + (1 - lam) * np.roll(x, 1, axis=0)
                else:  # CutMix: a box of area 1 - lam from the rolled batch
                    lam = float(rng.beta(1.0, 1.0))
                    H, W = x.shape[2:]
                    cy, cx = int(rng.integers(H)), int(rng.integers(W))
                    hh, hw = int(0.5 * math.sqrt(1 - lam) * H), int(0.5 * math.sqrt(1 - lam) * W)
                    y0, y1, x0, x1 = max(cy - hh, 0), min(cy + hh, H), max(cx - hw, 0), min(cx + hw, W)
                    x[:, :, y0:y1, x0:x1] = np.roll(x, 1, axis=0)[:, :, y0:y1, x0:x1]
                    lam = np.float32(1 - (y1 - y0) * (x1 - x0) / (H * W))
                y = lam * y + (1 - lam) * np.roll(y, 1, axis=0)
            yield x, y

    out, last = workers.timed(workers.epochs(mixed), a.warmup, a.batches, lambda b: b[0].shape[0])
    out["shape"], out["labels_shape"] = list(last[0].shape), list(last[1].shape)
    out["dali"] = dali.__version__
    out["erased_share"] = round(erased[0] / max(1, erased[1]), 3)  # expected: the recipe's p
    print(json.dumps(out))


def worker(a):
    loader_kind, name = a.worker.split("/")
    if loader_kind == "dali":
        return dali_worker(a, name)
    import torch
    compose, mix = recipe(name)
    if loader_kind == "feedline":
        import feedline
        ld = feedline.Loader(a.data, batch_size=a.batch, transform=compose, batch_transform=mix, shuffle=True,
                             seed=1, drop_last=True, num_threads=a.cores, strict=True)
        out, last = workers.timed(workers.epochs(lambda: iter(ld)), a.warmup, a.batches, lambda b: b[0].shape[0])
        out["ops"] = [o["name"] for o in ld.stats()["ops"]]
        ld.close()
    elif loader_kind == "torch":
        from torch.utils.data import DataLoader, default_collate
        from torchvision.datasets import ImageFolder
        torch.manual_seed(1)

        def collate(batch):
            images, labels = default_collate(batch)
            return mix(images, labels) if mix is not None else (images, labels)
        ld = DataLoader(ImageFolder(a.data, compose), batch_size=a.batch, shuffle=True, num_workers=a.cores,
                        drop_last=True, persistent_workers=True, collate_fn=collate)
        out, last = workers.timed(workers.epochs(lambda: iter(ld)), a.warmup, a.batches, lambda b: b[0].shape[0])
    else:
        raise SystemExit(f"unknown worker {a.worker}")
    out["shape"], out["labels_shape"] = list(last[0].shape), list(last[1].shape)
    import torchvision
    out["torch"], out["torchvision"] = torch.__version__, torchvision.__version__
    print(json.dumps(out))


def main():
    ap = workers.parser(images=1000)
    ap.add_argument("--no-dali", action="store_true", help="feedline and torch only (no DALI venv)")
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    if a.quick:
        workers.quick(a)
    cores = os.cpu_count() or 1
    folder = workers.ensure_dataset(FEEDLINE, a.images, NUM_CLASSES)
    kinds = ["feedline", "torch"]
    dali_python = None
    if not a.no_dali:  # DALI's venv, as bench-peers makes it (a failed set-up is reported, not fatal)
        sys.path.insert(0, str(ROOT / "bench" / "peers"))
        import envs  # noqa: E402
        st = envs.setup("dali")
        if st["ok"]:
            dali_python, kinds = str(envs.python_of("dali")), kinds + ["dali"]
        else:
            print(f"DALI: no venv ({st['error'].splitlines()[0]}); no DALI rows", file=sys.stderr)
    configs = [f"{kind}/{r}" for r in RECIPES for kind in kinds]
    runs = {}
    for _ in range(a.repeats):  # interleaved, so drift hits all alike
        for name in configs:
            python = dali_python if name.startswith("dali/") else sys.executable
            runs.setdefault(name, []).append(
                workers.run_worker(str(pathlib.Path(__file__).resolve()), python, name, folder, a, cores,
                                   PYTHONPATH, raise_on_error=False))
    table = {}
    for name, rs in runs.items():
        ok = [r for r in rs if "error" not in r]
        if not ok:
            table[name] = {"samples_per_s": None, "error": rs[-1]["error"]}
            continue
        rates = [r["samples_per_s"] for r in ok]
        table[name] = {"samples_per_s": statistics.median(rates), "min": min(rates), "max": max(rates),
                       "first_batch_s": statistics.median(r["first_batch_s"] for r in ok),
                       "failed_runs": len(rs) - len(ok), "runs": rs}
    ratios = {}
    for r in RECIPES:
        n, d = table[f"feedline/{r}"]["samples_per_s"], table[f"torch/{r}"]["samples_per_s"]
        ratios[f"{r}: feedline / torch DataLoader + torchvision v2 (target >= 5x)"] = n / d if n and d else None
        if f"dali/{r}" in table:
            g = table[f"dali/{r}"]["samples_per_s"]
            ratios[f"{r}: feedline / DALI (CPU)"] = n / g if n and g else None
    first = next((r for rs in runs.values() for r in rs if "error" not in r), {})
    meta = {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {cores} cores",
            "dataset": f"{a.images} generated ImageNet-like images ({folder.name})", "batch": a.batch,
            "repeats": a.repeats, "torch": first.get("torch"), "torchvision": first.get("torchvision"),
            "dali": next((r.get("dali") for rs in runs.values() for r in rs if r.get("dali")), None),
            "load_avg_1min": os.getloadavg()[0]}
    lines = ["# Augmentation recipes: feedline vs torch DataLoader + torchvision v2 (issue 17)", "",
             f"{meta['date']}, {meta['machine']}, {meta['dataset']}, batch {a.batch}, {a.batches} timed batches "
             f"after {a.warmup}, median of {a.repeats} interleaved rounds (spread min-max), torch {meta['torch']}, "
             f"torchvision {meta['torchvision']}, load average {meta['load_avg_1min']:.1f} at the end. Both loaders "
             f"get the same torchvision v2 Compose; feedline runs it natively (strict=True), torch in "
             f"{cores} worker processes with the batch mix in collate_fn."
             + (f" DALI {meta['dali']} (CPU, {cores} threads) runs the same recipes with its own operators and "
                "policies, the batch mix in numpy (the module's docstring)." if meta["dali"] else ""), ""]
    lines += workers.rate_rows(table, lambda e: "failed | " + e.splitlines()[-1][:160])
    lines += [""] + workers.ratio_rows(ratios)
    text = "\n".join(lines) + "\n"
    print(text)
    bench_results.write("augment", {"meta": meta, "results": table, "ratios": ratios}, text, quick=a.quick)


if __name__ == "__main__":
    main()
