"""The main job (`make demo`): one short training run fed by a torch
DataLoader set up as the PyTorch tutorials do, then the same run fed by
feedline, each watched by the doctor, then the two side by side.

    python3 -m feedline.demo --data DIR [--shards DIR] [--out DIR]

The step is a real model on the GPU when there is one (ResNet-18, bf16
autocast, channels_last). Without one it is a SIMULATED accelerator: the
loop is held for the time an accelerator consuming --rate images/s would
take per batch (time.sleep: it uses no CPU, as a GPU step would not).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import torch

import feedline
from feedline import doctor as fdoctor

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


Step = Callable[[Any], None]


def make_step(batch_size: int, rate: float, device: Optional[torch.device]) -> Tuple[Step, str]:
    """The training step, and a line that says what it is."""
    if device is None:
        seconds = batch_size / rate

        def simulated_step(batch: Any) -> None:
            time.sleep(seconds)

        return simulated_step, (f"SIMULATED accelerator (no GPU here): consumes {rate:.0f} images/s, "
                      f"so each step holds the loop {1e3 * seconds:.1f} ms")
    import torchvision
    model = torchvision.models.resnet18(num_classes=1000).to(device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(batch: Tuple[torch.Tensor, torch.Tensor]) -> None:
        images, labels = batch
        images = images.to(device, non_blocking=True).to(memory_format=torch.channels_last)
        labels = labels.to(device, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(images), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step, f"ResNet-18 on {torch.cuda.get_device_name(device)} (bf16 autocast, channels_last)"


def torch_loader(data: str, batch_size: int, workers: int, pin: bool) -> Any:
    import torchvision
    from torchvision import transforms as T
    ds = torchvision.datasets.ImageFolder(data, T.Compose([
        T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)]))
    return torch.utils.data.DataLoader(ds, batch_size=batch_size, shuffle=True, num_workers=workers,
                                       pin_memory=pin, drop_last=True)


def train(name: str, loader: Iterable[Any], step: Step, epochs: int, out: str) -> Dict[str, Any]:
    doc = fdoctor.Doctor()
    t0 = time.perf_counter()
    for _ in range(epochs):
        for batch in doc.watch(loader, step_fn=step):
            step(batch)
    wall = time.perf_counter() - t0
    report = doc.report(file=None, html=os.path.join(out, f"{name}.html"),
                        json=os.path.join(out, f"{name}.json"), trace=os.path.join(out, f"{name}.trace.json"))
    doc.detach()
    loop = report.data["loop"]
    top = report.top
    rate = loop.get("steady_samples_per_s") or loop["samples_per_s"]
    print(f"    {rate:7.0f} images/s, starved {100 * loop['starvation']:.0f}% of the time "
          f"({loop['steps']} steps in {wall:.1f} s)")
    if top is not None:
        print(f"    bottleneck: {top['title']}")
        pred = top.get("predicted_samples_per_s")
        print(f"    top recommendation: {top['fix']}" + (f" (predicted {pred:.0f} images/s)" if pred else ""))
    print(f"    report: {os.path.join(out, name + '.html')}")
    return {"rate": rate, "starvation": loop["starvation"], "top": top}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="an ImageFolder tree (the torch run reads it)")
    ap.add_argument("--shards", help="the same images packed with `feedline pack` (the feedline run reads "
                                     "them); default: --data")
    ap.add_argument("--out", default="build/demo", help="where the reports go")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--rate", type=float, default=2000, help="the simulated accelerator's images/s")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    cores = len(os.sched_getaffinity(0))
    device = torch.device("cuda") if torch.cuda.is_available() else None
    step, what = make_step(a.batch_size, a.rate, device)
    shards = a.shards or a.data
    print(f"feedline demo: ImageNet train recipe on {a.data}, batch {a.batch_size}, {a.epochs} epochs, "
          f"{cores} cores")
    print(f"  step: {what}\n")

    print(f"[1/2] torch DataLoader: ImageFolder + torchvision transforms, num_workers={cores}, "
          f"pin_memory={device is not None}")
    peer = train("torch", torch_loader(a.data, a.batch_size, cores, device is not None), step, a.epochs, a.out)

    # A simulated step uses no CPU, so the loader may have every core, as the
    # peer's worker processes do; a real GPU loop keeps one for itself.
    budget = cores if device is None else max(1, cores - 1)
    print(f"\n[2/2] feedline.Loader: {'packed shards' if a.shards else 'image folder'}, threads auto "
          f"(cpu_budget={budget}){', device prefetch' if device is not None else ''}")
    loader = feedline.Loader(shards, batch_size=a.batch_size, transform=feedline.transforms.imagenet_train(224),
                             shuffle=True, seed=0, drop_last=True, cpu_budget=budget, device=device)
    ours = train("feedline", loader, step, a.epochs, a.out)
    loader.close()

    print("\nside by side")
    print(f"  {'':24} {'images/s':>9} {'starved':>8}")
    for name, r in (("torch DataLoader", peer), ("feedline", ours)):
        print(f"  {name:24} {r['rate']:9.0f} {100 * r['starvation']:7.0f}%")
    print(f"  feedline / torch: {ours['rate'] / peer['rate']:.2f}x images/s"
          + (" (accelerator simulated)" if device is None else ""))
    print(f"\nHTML reports: {os.path.abspath(a.out)}/torch.html and feedline.html "
          f"(traces: *.trace.json, open in https://ui.perfetto.dev)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
