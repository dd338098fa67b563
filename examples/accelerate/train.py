"""Hugging Face Accelerate with a feedline loader (docs/integrations.md).
The loop is the user's own. `accelerator.prepare` hands a feedline.Loader
back untouched (it wraps DataLoaders only), so the loader shards itself
once, and `accelerator.register_for_checkpointing(loader)` puts its state in
every `save_state` and restores it in `load_state`: the resumed run goes on
from the next batch, with no `skip_first_batches` (nothing re-read), and
the step it goes on from is the loader's own position.

    python examples/accelerate/train.py --data PARQUET_OR_DIR [--steps 200] [--save-at 70 --ckpt DIR]
        [--resume DIR] [--record ids.jsonl] [--doctor report.json]

Several processes: once per rank with RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT set (or `accelerate launch`)."""
import argparse
import json

import torch
from accelerate import Accelerator
from torch import nn

import feedline


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--save-at", type=int, default=0)
    ap.add_argument("--ckpt", default="accelerate-ckpt")
    ap.add_argument("--resume", default=None)
    ap.add_argument("--record", default="")
    ap.add_argument("--doctor", default="", help="write the doctor's JSON report here")
    a = ap.parse_args()
    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(16, a.classes))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    # The change, two lines: a feedline.Loader in place of the DataLoader, and its state in the checkpoints.
    loader = feedline.Loader(a.data, batch_size=a.batch_size, shuffle=True, seed=1, drop_last=True,
                             transform=feedline.transforms.imagenet_eval(32, resize=40), num_threads=1,
                             fields={"image": "image", "label": "label", "idx": "idx"})
    accelerator.register_for_checkpointing(loader)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)  # the loader comes back as it was
    if a.resume:
        accelerator.load_state(a.resume)  # the loader's load_state_dict: its next pass resumes mid-epoch
    epoch, batch = loader.position
    step = epoch * len(loader) + batch
    doctor = feedline.doctor.Doctor() if a.doctor else None
    record = f"{a.record}.rank{accelerator.process_index}" if a.record else ""
    while step < a.steps:
        for b in (doctor.watch(loader) if doctor else loader):
            loss = nn.functional.cross_entropy(model(b["image"]), b["label"])
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            if record:
                with open(record, "a") as f:
                    f.write(json.dumps({"step": step, "ids": b["idx"].tolist(), "loss": float(loss)}) + "\n")
            step += 1
            if step == a.save_at:
                accelerator.save_state(a.ckpt)
            if step >= a.steps:
                break
    if doctor:
        doctor.report(file=None, json=a.doctor)  # every rank calls it; rank 0 writes the job's report


if __name__ == "__main__":
    main()
