"""The Hugging Face Trainer (transformers 5.x) on a feedline loader
(docs/integrations.md): FeedlineTrainer is the Trainer with a
`train_loader=` (the two-line change: the loader, and the class); the
Trainer's checkpoints carry the loader's position, and
`train(resume_from_checkpoint=...)` goes on from the next batch without
re-reading the batches before it.

    python examples/hf_trainer/train.py --data PARQUET_OR_DIR --out DIR [--steps 200] [--save-every 70]
        [--resume] [--record ids.jsonl] [--doctor report.json]

Several processes: once per rank with RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT set (or torchrun)."""
import argparse
import json
import os

import torch
from torch import nn
from transformers import TrainerCallback, TrainingArguments

import feedline
from feedline.integrations.hf import DoctorCallback, FeedlineTrainer


class Net(nn.Module):
    """A small CNN with the Trainer's calling convention: forward(**batch) -> {"loss", "logits"}."""

    def __init__(self, classes: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                 nn.Flatten(), nn.Linear(16, classes))
        self.seen: list = []  # (ids, loss) of the step in progress, for --record

    def forward(self, pixel_values, labels, idx=None):
        logits = self.net(pixel_values)
        loss = nn.functional.cross_entropy(logits, labels)
        if idx is not None:
            self.seen.append((idx.tolist(), float(loss)))
        return {"loss": loss, "logits": logits}


class Record(TrainerCallback):
    """Which rows each step trained on, and its loss (the test compares runs)."""

    def __init__(self, path: str, model: Net) -> None:
        self.path, self.model = path, model

    def on_step_end(self, args, state, control, **kwargs):
        ids = [i for batch_ids, _ in self.model.seen for i in batch_ids]
        loss = sum(v for _, v in self.model.seen) / max(1, len(self.model.seen))
        self.model.seen.clear()
        with open(self.path, "a") as f:
            f.write(json.dumps({"step": state.global_step - 1, "ids": ids, "loss": loss}) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--save-every", type=int, default=0)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--record", default="")
    ap.add_argument("--doctor", default="", help="write the doctor's JSON report here")
    a = ap.parse_args()
    torch.manual_seed(0)
    model = Net(a.classes)
    args = TrainingArguments(output_dir=a.out, max_steps=a.steps, per_device_train_batch_size=a.batch_size,
                             learning_rate=0.05, lr_scheduler_type="constant", optim="sgd", use_cpu=True,
                             save_strategy="steps" if a.save_every else "no", save_steps=a.save_every or 500,
                             logging_steps=50, report_to="none", disable_tqdm=True, seed=0)
    callbacks = []
    if a.record:
        callbacks.append(Record(f"{a.record}.rank{int(os.environ.get('RANK', 0))}", model))
    if a.doctor:
        callbacks.append(DoctorCallback(file=None, json=a.doctor))
    # The change: a feedline.Loader (keys = the model's arguments), given to FeedlineTrainer.
    loader = feedline.Loader(a.data, batch_size=a.batch_size, shuffle=True, seed=1, drop_last=True,
                             transform=feedline.transforms.imagenet_eval(32, resize=40), num_threads=1,
                             fields={"pixel_values": "image", "labels": "label", "idx": "idx"})
    trainer = FeedlineTrainer(model=model, args=args, train_loader=loader, callbacks=callbacks)
    trainer.train(resume_from_checkpoint=True if a.resume else None)


if __name__ == "__main__":
    main()
