"""Lightning Fabric with a feedline loader (docs/integrations.md): the loop
is the user's own; `fabric.save` / `fabric.load` checkpoint the loader with
the model and optimizer (a feedline.Loader is a Stateful object to Fabric),
so a run resumed mid-epoch continues with exactly the next batch.

    python examples/lightning/fabric_train.py --data DIR_OR_PARQUET [--steps 30] [--save-at 10 --ckpt F]
        [--resume F] [--record ids.jsonl] [--devices N]

Several processes: once per rank with LOCAL_RANK, NODE_RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT set, and --devices N."""
import argparse
import json

import lightning as L
import torch
from torch import nn

import feedline


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--save-at", type=int, default=0)
    ap.add_argument("--ckpt", default="fabric.ckpt")
    ap.add_argument("--resume", default=None)
    ap.add_argument("--record", default="")
    ap.add_argument("--devices", type=int, default=1)
    a = ap.parse_args()
    fabric = L.Fabric(accelerator="cpu", devices=a.devices, strategy="ddp" if a.devices > 1 else "auto")
    fabric.launch()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(16, a.classes))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model, optimizer = fabric.setup(model, optimizer)
    # The change: a feedline.Loader (sharded by itself: not passed to fabric.setup_dataloaders).
    loader = feedline.Loader(a.data, batch_size=a.batch_size, shuffle=True, seed=1, drop_last=True,
                             transform=feedline.transforms.imagenet_eval(32, resize=40), num_threads=1,
                             fields={"image": "image", "label": "label", "idx": "idx"})
    state = {"model": model, "optimizer": optimizer, "loader": loader, "step": 0}
    if a.resume:
        fabric.load(a.resume, state)  # the loader's load_state_dict: the next iteration resumes mid-epoch
    record = f"{a.record}.rank{fabric.global_rank}" if a.record else ""
    step = state["step"]
    while step < a.steps:
        for batch in loader:
            loss = nn.functional.cross_entropy(model(batch["image"]), batch["label"])
            optimizer.zero_grad()
            fabric.backward(loss)
            optimizer.step()
            if record:
                with open(record, "a") as f:
                    f.write(json.dumps({"step": step, "ids": batch["idx"].tolist(), "loss": float(loss)}) + "\n")
            step += 1
            if step == a.save_at:
                state["step"] = step
                fabric.save(a.ckpt, state)
            if step >= a.steps:
                break


if __name__ == "__main__":
    main()
