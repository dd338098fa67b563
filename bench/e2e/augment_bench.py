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
as the reference scripts do. DALI's CPU pipeline has no TrivialAugmentWide,
RandAugment, MixUp or CutMix, so it has no row here (bench-peers measures
it on the plain recipe).

Needs torchvision >= 0.16 (transforms.v2 with MixUp/CutMix): it runs under
the torch 2 venv of `make test-torch2` (build/venv-torch2, feedline from
build-torch2/python). Each configuration is its own process (`--worker
NAME`) printing one JSON line; results go to bench/results/augment.{json,md}.

    build/venv-torch2/bin/python bench/e2e/augment_bench.py [--images 1000] [--repeats 3] [--quick]
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


def worker(a):
    import torch
    loader_kind, name = a.worker.split("/")
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
    a = workers.parser(images=1000).parse_args()
    if a.worker:
        return worker(a)
    if a.quick:
        workers.quick(a)
    cores = os.cpu_count() or 1
    folder = workers.ensure_dataset(FEEDLINE, a.images, NUM_CLASSES)
    configs = [f"{kind}/{r}" for r in RECIPES for kind in ("feedline", "torch")]
    runs = {}
    for _ in range(a.repeats):  # interleaved, so drift hits all alike
        for name in configs:
            runs.setdefault(name, []).append(
                workers.run_worker(str(pathlib.Path(__file__).resolve()), sys.executable, name, folder, a, cores,
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
    first = next((r for rs in runs.values() for r in rs if "error" not in r), {})
    meta = {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {cores} cores",
            "dataset": f"{a.images} generated ImageNet-like images ({folder.name})", "batch": a.batch,
            "repeats": a.repeats, "torch": first.get("torch"), "torchvision": first.get("torchvision"),
            "load_avg_1min": os.getloadavg()[0]}
    lines = ["# Augmentation recipes: feedline vs torch DataLoader + torchvision v2 (issue 17)", "",
             f"{meta['date']}, {meta['machine']}, {meta['dataset']}, batch {a.batch}, {a.batches} timed batches "
             f"after {a.warmup}, median of {a.repeats} interleaved rounds (spread min-max), torch {meta['torch']}, "
             f"torchvision {meta['torchvision']}, load average {meta['load_avg_1min']:.1f} at the end. Both loaders "
             f"get the same torchvision v2 Compose; feedline runs it natively (strict=True), torch in "
             f"{cores} worker processes with the batch mix in collate_fn.", ""]
    lines += workers.rate_rows(table, lambda e: "failed | " + e.splitlines()[-1][:160])
    lines += [""] + workers.ratio_rows(ratios)
    text = "\n".join(lines) + "\n"
    print(text)
    bench_results.write("augment", {"meta": meta, "results": table, "ratios": ratios}, text, quick=a.quick)


if __name__ == "__main__":
    main()
