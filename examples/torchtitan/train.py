"""torchtitan's dataloader interface on feedline.TokenLoader
(docs/integrations.md): the loader is built as torchtitan's Trainer builds
its own (`config.dataloader.build(dp_world_size=, dp_rank=, seq_len=,
local_batch_size=)`), iterated for (input_dict, labels), and checkpointed
as torchtitan's CheckpointManager does it: the Stateful dataloader inside
the state given to torch.distributed.checkpoint (DCP). A small causal LM
(embedding, one GRU, a head) under DDP on gloo stands in for the model.

    python examples/torchtitan/train.py --data train.bin [--steps 200] [--save-at 70 --ckpt DIR]
        [--resume DIR] [--record rows.jsonl] [--doctor report.json --doctor-steps 50]

Several processes: once per rank with RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT set (torchrun's variables)."""
import argparse
import json
import os
import zlib

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn

from feedline.integrations.torchtitan import TokenDataLoader


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 64, dim: int = 32) -> None:
        super().__init__()
        self.emb, self.head = nn.Embedding(vocab, dim), nn.Linear(dim, vocab)
        self.rnn = nn.GRU(dim, dim, batch_first=True)

    def forward(self, tokens):
        return self.head(self.rnn(self.emb(tokens))[0])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--save-at", type=int, default=0)
    ap.add_argument("--ckpt", default="torchtitan-ckpt")
    ap.add_argument("--resume", default=None)
    ap.add_argument("--record", default="")
    ap.add_argument("--doctor", default="", help="the doctor's report after --doctor-steps steps, as JSON here")
    ap.add_argument("--doctor-steps", type=int, default=50)
    a = ap.parse_args()
    world = int(os.environ.get("WORLD_SIZE", 1))
    if world > 1:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if world > 1 else 0
    torch.manual_seed(0)
    model = TinyLM()
    ddp = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    # The change: torchtitan's config.dataloader is feedline's (here built as its Trainer builds it).
    config = TokenDataLoader.Config(dataset_path=a.data, dtype="uint16", seed=1, num_threads=1,
                                    doctor_steps=a.doctor_steps if a.doctor else 0, doctor_json=a.doctor)
    dataloader = config.build(dp_world_size=world, dp_rank=rank, tokenizer=None, seq_len=a.seq_len,
                              local_batch_size=a.batch_size)
    step = torch.zeros((), dtype=torch.int64)
    state = {"dataloader": dataloader, "model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
    if a.resume:
        dcp.load(state, checkpoint_id=a.resume)  # the dataloader's load_state_dict, as CheckpointManager does
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
    record = f"{a.record}.rank{rank}" if a.record else ""
    data = iter(dataloader)
    while int(step) < a.steps:
        epoch, index = dataloader.loader.position
        inputs, labels = next(data)
        logits = ddp(inputs["input"])
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if record:
            rows = [zlib.crc32(r.numpy().tobytes()) for r in inputs["input"]]
            with open(record, "a") as f:
                f.write(json.dumps({"step": int(step), "epoch": epoch, "batch": index, "ids": rows,
                                    "loss": float(loss)}) + "\n")
        step += 1
        if int(step) == a.save_at:
            dcp.save({"dataloader": dataloader, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                      "step": step}, checkpoint_id=a.ckpt)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
