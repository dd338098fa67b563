"""The peer: torch DataLoader + torchvision transforms on PIL images, set up
the way the PyTorch ImageNet example does it. Prints one JSON line.

CPU time is measured over the timed window only, for this process and
every DataLoader worker (from /proc), so interpreter start-up and imports
do not count against the peer.
"""
import argparse
import json
import os
import pathlib
import sys
import time

import torch
import torchvision.transforms as T
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from bench.common.procfs import cpu_seconds  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--recipe", choices=["train", "eval"], default="train")
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--batches", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    a = p.parse_args()
    if a.recipe == "train":
        tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
    else:
        tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)])
    torch.manual_seed(1)
    t_create = time.perf_counter()
    loader = DataLoader(ImageFolder(a.data, tf), batch_size=a.batch, shuffle=a.recipe == "train",
                        num_workers=a.workers, drop_last=True, persistent_workers=a.workers > 0)
    got, images, first_batch_s = 0, 0, 0.0
    t0 = cpu0 = None
    pids = [os.getpid()]
    while got < a.warmup + a.batches:
        for images_batch, _labels in loader:
            if got == 0:
                first_batch_s = time.perf_counter() - t_create
                pids = [os.getpid()] + [w.pid for w in getattr(loader._iterator, "_workers", [])]
            got += 1
            if got == a.warmup:
                t0, cpu0 = time.perf_counter(), cpu_seconds(pids)
            elif got > a.warmup:
                images += images_batch.shape[0]
            if got == a.warmup + a.batches:
                break
    seconds = time.perf_counter() - t0
    cpu = cpu_seconds(pids) - cpu0
    print(json.dumps({"mode": "torch", "recipe": a.recipe, "workers": a.workers, "batch": a.batch,
                      "images": images, "seconds": round(seconds, 4),
                      "images_per_s": round(images / seconds, 1), "cpu_s": round(cpu, 3),
                      "first_batch_s": round(first_batch_s, 4)}))


if __name__ == "__main__":
    main()
