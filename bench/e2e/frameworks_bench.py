"""Trainer frameworks (issue 37 "Benchmarks"): a small CNN fit on the
generated image set on the CPU, each framework with its usual DataLoader
set-up and with feedline, side by side in one run:

- lightning/*: a Lightning Trainer (train_dataloader() returns the loader),
- accelerate/*: the user's loop with Accelerate (prepare(); the DataLoader
  wrapped by it, feedline's loader handed back as it is),
- hf-trainer/*: the transformers Trainer (train_dataset + its DataLoader
  with dataloader_num_workers, or FeedlineTrainer(train_loader=)).

The DataLoader side: torchvision ImageFolder with the train Compose
(RandomResizedCrop, flip, normalise), num_workers = cores, persistent
workers; the feedline side: feedline.Loader over the same folder with the
same Compose (translated natively), num_threads = cores. samples/s over the
steps after a warm-up, the framework's own step included (a CNN small
enough that the loader decides the rate). Interleaved rounds, medians,
each configuration in its own process. Results: bench/results/frameworks.{json,md}.

    <torch2 venv>/bin/python bench/e2e/frameworks_bench.py [--images 1000] [--repeats 3] [--quick]
"""
import datetime
import json
import os
import pathlib
import platform
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
FEEDLINE = os.environ.get("FEEDLINE_BIN", str(ROOT / "build-torch2" / "tools" / "feedline"))
PYTHONPATH = os.environ.get("FEEDLINE_PYTHONPATH", str(ROOT / "build-torch2" / "python"))
sys.path.insert(0, str(ROOT))
from bench.common import results as bench_results  # noqa: E402
from bench.common import workers  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
NUM_CLASSES = 10
SIZE = 128
FRAMEWORKS = ("lightning", "accelerate", "hf-trainer")
CONFIGS = tuple(f"{f}/{side}" for f in FRAMEWORKS for side in ("DataLoader", "feedline"))


def compose():
    import torch
    import torchvision.transforms.v2 as T
    return T.Compose([T.RandomResizedCrop(SIZE, antialias=True), T.RandomHorizontalFlip(), T.PILToTensor(),
                      T.ToDtype(torch.float32, scale=True), T.Normalize(MEAN, STD)])


def net():
    from torch import nn
    return nn.Sequential(nn.Conv2d(3, 16, 3, stride=4, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, stride=2, padding=1),
                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, NUM_CLASSES))


class Clock:
    """Step end times; the rate is over the steps after the warm-up."""

    def __init__(self, batch):
        self.batch, self.times = batch, []

    def tick(self):
        self.times.append(time.perf_counter())

    def result(self, warmup):
        t = self.times[warmup - 1:]
        samples = (len(t) - 1) * self.batch
        s = t[-1] - t[0]
        return {"samples": samples, "seconds": round(s, 4), "samples_per_s": round(samples / s, 1),
                "steps": len(self.times)}


def loaders(side, folder, a):
    """(the loader, a batch -> (images, labels)) for this side."""
    import torch
    if side == "feedline":
        import feedline
        ld = feedline.Loader(folder, batch_size=a.batch, transform=compose(), shuffle=True, seed=1, drop_last=True,
                             num_threads=a.cores, strict=True, fields={"pixel_values": "jpg;jpeg;png", "labels": "cls"})
        return ld
    import torchvision
    from torch.utils.data import DataLoader

    class Dicts(torch.utils.data.Dataset):
        def __init__(self):
            self.ds = torchvision.datasets.ImageFolder(folder, transform=compose())

        def __len__(self):
            return len(self.ds)

        def __getitem__(self, i):
            x, y = self.ds[i]
            return {"pixel_values": x, "labels": y}

    return Dicts() if a.worker.startswith("hf-trainer") else DataLoader(
        Dicts(), batch_size=a.batch, shuffle=True, num_workers=a.cores, drop_last=True, persistent_workers=True)


def run_lightning(side, folder, a, clock, steps):
    import lightning as L
    import torch
    from torch import nn

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = net()

        def training_step(self, batch, i):
            return nn.functional.cross_entropy(self.net(batch["pixel_values"]), batch["labels"])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

        def on_train_batch_end(self, *args):
            clock.tick()

    class Data(L.LightningDataModule):
        def train_dataloader(self):
            return loaders(side, folder, a)

    L.Trainer(accelerator="cpu", devices=1, max_steps=steps, logger=False, enable_progress_bar=False,
              enable_model_summary=False, enable_checkpointing=False).fit(Module(), datamodule=Data())


def run_accelerate(side, folder, a, clock, steps):
    import torch
    from accelerate import Accelerator
    from torch import nn
    acc = Accelerator(cpu=True)
    model = net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    model, opt, ld = acc.prepare(model, opt, loaders(side, folder, a))
    done = 0
    while done < steps:
        for b in ld:
            loss = nn.functional.cross_entropy(model(b["pixel_values"]), b["labels"])
            opt.zero_grad()
            acc.backward(loss)
            opt.step()
            clock.tick()
            done += 1
            if done == steps:
                break


def run_hf(side, folder, a, clock, steps):
    from torch import nn
    from transformers import Trainer, TrainerCallback, TrainingArguments

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net()

        def forward(self, pixel_values, labels):
            logits = self.net(pixel_values)
            return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}

    class Tick(TrainerCallback):
        def on_step_end(self, *args, **kwargs):
            clock.tick()

    args = TrainingArguments(output_dir=str(folder.parent / "hf-bench-out"), max_steps=steps,
                             per_device_train_batch_size=a.batch, use_cpu=True, save_strategy="no",
                             report_to="none", disable_tqdm=True, dataloader_num_workers=a.cores,
                             dataloader_persistent_workers=True, dataloader_drop_last=True, optim="sgd",
                             learning_rate=0.05, logging_steps=10_000, remove_unused_columns=False)
    if side == "feedline":
        from feedline.integrations.hf import FeedlineTrainer
        trainer = FeedlineTrainer(model=Net(), args=args, train_loader=loaders(side, folder, a), callbacks=[Tick()])
    else:
        trainer = Trainer(model=Net(), args=args, train_dataset=loaders(side, folder, a), callbacks=[Tick()])
    trainer.train()


def worker(a):
    import torch
    torch.manual_seed(0)
    torch.set_num_threads(a.cores)
    framework, side = a.worker.split("/")
    folder = pathlib.Path(a.data)
    clock = Clock(a.batch)
    steps = a.warmup + a.batches
    run = {"lightning": run_lightning, "accelerate": run_accelerate, "hf-trainer": run_hf}[framework]
    run(side, folder, a, clock, steps)
    out = clock.result(a.warmup)
    import importlib.metadata as md
    out["framework_version"] = md.version({"hf-trainer": "transformers"}.get(framework, framework))
    out["torch"] = torch.__version__
    out["first_batch_s"] = 0.0
    print(json.dumps(out))


def main():
    ap = workers.parser(images=1000)
    a = ap.parse_args()
    if a.worker:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        return worker(a)
    if a.quick:
        workers.quick(a)
        a.warmup = 2
    cores = os.cpu_count() or 1
    folder = workers.ensure_dataset(FEEDLINE, a.images, NUM_CLASSES)
    runs = {}
    for _ in range(a.repeats):  # interleaved, so drift hits all alike
        for name in CONFIGS:
            runs.setdefault(name, []).append(
                workers.run_worker(str(pathlib.Path(__file__).resolve()), sys.executable, name, folder, a, cores,
                                   PYTHONPATH, raise_on_error=False))
    table = workers.median_table(runs, "samples_per_s")
    ratios = {}
    for f in FRAMEWORKS:
        d, fl = table[f"{f}/DataLoader"].get("samples_per_s"), table[f"{f}/feedline"].get("samples_per_s")
        ratios[f"{f}: feedline / its usual DataLoader"] = fl / d if d and fl else None
    first = next((r for rs in runs.values() for r in rs if "error" not in r), {})
    versions = {n.split("/")[0]: r.get("framework_version") for n, rs in runs.items() for r in rs if "error" not in r}
    meta = {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {cores} cores",
            "dataset": f"{a.images} generated ImageNet-like images", "batch": a.batch, "repeats": a.repeats,
            "torch": first.get("torch"), "versions": versions, "load_avg_1min": os.getloadavg()[0]}
    lines = ["# Trainer frameworks: a fit with the usual DataLoader vs with feedline (issue 37)", "",
             f"{meta['date']}, {meta['machine']}, {meta['dataset']}, batch {a.batch}, {a.batches} timed steps "
             f"after {a.warmup}, median of {a.repeats} interleaved rounds (spread min-max), torch {meta['torch']}, "
             + ", ".join(f"{k} {v}" for k, v in versions.items())
             + f", load average {meta['load_avg_1min']:.1f} at the end. A small CNN on RandomResizedCrop {SIZE} "
             f"+ flip + normalise; DataLoader: ImageFolder, {cores} workers; feedline: the same Compose natively, "
             f"{cores} threads. samples/s of the whole step (loader and model).", ""]
    lines += ["| configuration | samples/s | spread |", "|---|---|---|"]
    for n, r in table.items():
        lines.append(f"| {n} | failed: {r['error'].splitlines()[-1][:160]} | |" if r.get("error")
                     else f"| {n} | {r['samples_per_s']:.0f} | {r['min']:.0f}-{r['max']:.0f} |")
    lines += [""] + workers.ratio_rows(ratios)
    text = "\n".join(lines) + "\n"
    print(text)
    bench_results.write("frameworks", {"meta": meta, "results": table, "ratios": ratios}, text, quick=a.quick)
    failed = [n for n, r in table.items() if r.get("error")]
    if a.quick and failed:  # the CI smoke (make test-torch2): a configuration that rots fails it
        sys.exit(f"{', '.join(failed)} failed: " + table[failed[0]]["error"][-2000:])


if __name__ == "__main__":
    main()
