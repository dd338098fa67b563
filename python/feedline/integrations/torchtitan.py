"""torchtitan (0.3) training on feedline.TokenLoader (docs/integrations.md).

In the job's config, the dataloader is ours; nothing else changes:

    from feedline.integrations.torchtitan import TokenDataLoader
    config.dataloader = TokenDataLoader.Config(dataset_path="train.bin", dtype="uint16")

torchtitan's Trainer builds it with its data-parallel rank and degree, its
seq_len and local batch size (Configurable.build), iterates it for
(input_dict, labels) pairs, and its CheckpointManager saves
`states["dataloader"]` with torch.distributed.checkpoint (DCP) as the
Stateful it is. Our state is the global position of the engine, the same on
every rank, so it is saved under a key shared by all ranks (DCP keeps one
copy) and loads on another data-parallel degree that keeps the global
batch (local batch x degree, as an elastic job keeps it): the engine's
elastic resume continues at the next global batch (docs/engine.md), where
torchtitan's own dataloaders refuse another degree.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Optional

import torch
from torchtitan.components.dataloader import BaseDataLoader

from ..tokens import TokenLoader


class TokenDataLoader(BaseDataLoader):
    """A torchtitan BaseDataLoader over feedline.TokenLoader: batches of
    ({"input": input_ids}, labels), int64 [local_batch_size, seq_len], epoch
    after epoch (torchtitan trains for a number of steps)."""

    @dataclass(kw_only=True, slots=True)
    class Config(BaseDataLoader.Config):
        dtype: str = "uint16"
        """Of flat token files (nanoGPT's train.bin): uint16 or uint32."""
        eos_token: Optional[int] = None
        """The id ending a document in flat files (positions restart after it)."""
        packing: str = "concat"
        """"concat" or "best_fit" (feedline.TokenLoader)."""
        pad_token: Optional[int] = None
        """The padding id of best_fit."""
        shuffle: bool = True
        seed: int = 0
        num_threads: int = 0
        """Loader threads; 0: the engine's choice ("auto")."""
        mask_cross_document_labels: bool = False
        doctor_steps: int = 0
        """With N > 0, feedline's doctor watches the loop's requests for
        batches and every rank reports after N steps (a collective: rank 0
        prints it). torchtitan's loop has no callbacks; the loader is where
        the doctor sits."""
        doctor_json: str = ""
        """Where rank 0 writes that report's JSON ("": nowhere)."""

    def __init__(self, config: Config, *, dp_world_size: int, dp_rank: int, seq_len: int, local_batch_size: int,
                 tokenizer: Any = None, snapshot_every_n_steps: Optional[int] = None, **kwargs: Any) -> None:
        if not config.dataset_path:
            raise ValueError("TokenDataLoader.Config needs dataset_path: a token file, a Megatron prefix or a "
                             "feedline token-shard folder (feedline.pack_text)")
        self.dp_rank, self.dp_world_size = dp_rank, dp_world_size
        self.doctor_steps, self.doctor_json = int(config.doctor_steps), config.doctor_json
        self.report: Any = None  # the doctor's Report, once made
        self.loader = TokenLoader(config.dataset_path, seq_len=seq_len, batch_size=local_batch_size,
                                  dtype=config.dtype, eos_token=config.eos_token, packing=config.packing,
                                  pad_token=config.pad_token, shuffle=config.shuffle, seed=config.seed,
                                  drop_last=True, rank=dp_rank, world_size=dp_world_size, elastic=True,
                                  num_threads=config.num_threads or "auto", fields=("input_ids", "labels"),
                                  mask_cross_document_labels=config.mask_cross_document_labels)

    def __iter__(self) -> Iterator[tuple[dict[str, torch.Tensor], torch.Tensor]]:
        doctor = None
        if self.doctor_steps > 0 and self.report is None:
            from ..doctor import Doctor
            from . import loop_site
            doctor = Doctor(what_if=False)
            doctor.loop_site = loop_site("torchtitan", "torchtitan", "Trainer.train")
        seen = 0
        while True:
            for batch in (doctor.watch(self.loader) if doctor is not None else self.loader):
                if doctor is not None and seen == self.doctor_steps:
                    # N steps done (the loop asked for batch N + 1), on every
                    # rank alike (the loop is in lockstep). The watched pass
                    # goes on to the epoch's end: leaving it would restart it.
                    self.report = doctor.report(json=self.doctor_json or None)
                yield {"input": batch["input_ids"]}, batch["labels"]
                seen += 1

    def __len__(self) -> int:
        return len(self.loader)

    def state_dict(self) -> dict[str, Any]:
        s = self.loader.state_dict()
        return {"feedline_version": s["version"], "feedline_state": s["sampler"],
                "world_size": self.dp_world_size}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not state_dict:  # torchtitan passes an empty state for a fresh start
            return
        self.loader.load_state_dict({"version": state_dict["feedline_version"],
                                     "sampler": state_dict["feedline_state"]})

    def close(self) -> None:
        self.loader.close()
