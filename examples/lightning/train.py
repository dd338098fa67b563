"""PyTorch Lightning with a feedline loader (docs/integrations.md): the
LightningDataModule returns a feedline.Loader, and that is the whole change.
Lightning leaves a loader that is not a DataLoader unsharded (feedline takes
its rank and world from torch.distributed, set up by then), saves its
state_dict() in every checkpoint and loads it before iterating, so a run
resumed from a mid-epoch checkpoint sees exactly the samples an
uninterrupted one would have.

    python examples/lightning/train.py --data DIR_OF_PARQUET_OR_IMAGES [--max-steps 200]
        [--ckpt-every 50] [--resume CKPT] [--record ids.jsonl] [--out DIR] [--doctor report.json]

On several processes, launch it once per rank with LOCAL_RANK, NODE_RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (Lightning then uses them) and
--devices N."""
import argparse
import json
import os

import lightning as L
import torch
from torch import nn

import feedline
from feedline.integrations.lightning import DoctorCallback


class Net(L.LightningModule):
    def __init__(self, classes: int, record: str = "") -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, classes))
        self.record = record

    def training_step(self, batch, batch_idx):
        loss = nn.functional.cross_entropy(self.net(batch["image"]), batch["label"])
        if self.record:  # which rows this rank trained on at this step, and the loss
            with open(self.record, "a") as f:
                f.write(json.dumps({"step": int(self.global_step), "ids": batch["idx"].tolist(),
                                    "loss": float(loss)}) + "\n")
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


class Data(L.LightningDataModule):
    def __init__(self, path: str, batch_size: int) -> None:
        super().__init__()
        self.path, self.batch_size = path, batch_size

    def train_dataloader(self):
        # The change: a feedline.Loader instead of a DataLoader (no sampler: it shards itself).
        return feedline.Loader(self.path, batch_size=self.batch_size, shuffle=True, seed=1, drop_last=True,
                               transform=feedline.transforms.imagenet_eval(32, resize=40), num_threads=1,
                               fields={"image": "image", "label": "label", "idx": "idx"})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--max-steps", type=int, default=200)
    ap.add_argument("--ckpt-every", type=int, default=0)
    ap.add_argument("--resume", default=None)
    ap.add_argument("--record", default="")
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--out", default="lightning-out")
    ap.add_argument("--doctor", default="", help="write the doctor's JSON report here")
    a = ap.parse_args()
    torch.manual_seed(0)
    callbacks = []
    if a.doctor:  # the doctor inside the Trainer: a Callback
        callbacks.append(DoctorCallback(file=None, json=a.doctor))
    if a.ckpt_every:
        callbacks.append(L.pytorch.callbacks.ModelCheckpoint(dirpath=a.out, every_n_train_steps=a.ckpt_every,
                                                             save_top_k=-1, filename="{step}"))
    trainer = L.Trainer(accelerator="cpu", devices=a.devices, strategy="ddp" if a.devices > 1 else "auto",
                        max_steps=a.max_steps, callbacks=callbacks, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=bool(a.ckpt_every),
                        num_sanity_val_steps=0, default_root_dir=a.out)
    record = f"{a.record}.rank{int(os.environ.get('LOCAL_RANK', 0))}" if a.record else ""
    trainer.fit(Net(a.classes, record), datamodule=Data(a.data, a.batch_size), ckpt_path=a.resume)


if __name__ == "__main__":
    main()
