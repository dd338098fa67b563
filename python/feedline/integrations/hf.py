"""The Hugging Face Trainer (transformers 5.x) on a feedline loader
(docs/integrations.md).

    from feedline.integrations.hf import FeedlineTrainer
    trainer = FeedlineTrainer(model=model, args=args, train_loader=feedline.Loader(...))
    trainer.train(resume_from_checkpoint=True)

What the Trainer does with a loader, and what FeedlineTrainer changes:

- get_train_dataloader() returns the feedline loader (through a thin
  adapter), not a DataLoader: the Trainer does not wrap it in a sampler or
  in Accelerate's DataLoaderShard, so it is sharded once, by feedline (its
  rank and world from torch.distributed). The Trainer moves each batch to
  its device (_prepare_inputs), so the loader yields host tensors.
- Every checkpoint-N folder gets the loader's state (feedline_loader.json,
  written by rank 0 in the Trainer's on_save callback: the state is the
  same on every rank).
- On resume the Trainer computes how many batches of the epoch were trained
  and would skip them with accelerate.skip_first_batches, which rebuilds a
  DataLoader over `dataloader.dataset` and re-reads them. A feedline loader
  is positioned instead: its saved state is loaded (which checks that the
  data, seed and options are the same) and the Trainer's count is checked
  against it, then the resumed epoch starts at that batch without reading
  the ones before it. That check replaces skip_first_batches in
  transformers.trainer for the duration of train(), for this Trainer's
  loader only (anything else goes to Accelerate's function): the Trainer
  has no public hook for it.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Any, Iterator, Optional

import transformers
import transformers.trainer as _trainer_module
from transformers import Trainer, TrainerCallback

from ..doctor import Doctor
from . import STATE_FILE, load_state, loop_site, save_state


class _TrainerLoader:
    """What get_train_dataloader() returns: the loader, its length and
    epochs, and the position a resume put it at."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.batch_size = getattr(loader, "batch_size", None)
        self._resumed: Optional[tuple[int, int]] = None  # (epoch, next batch) of a loaded state

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.loader)

    def resume(self, state: dict[str, Any]) -> None:
        self.loader.load_state_dict(state)  # raises when the data, seed or options differ
        self._resumed = tuple(self.loader.position)

    def set_epoch(self, epoch: int) -> None:
        if self._resumed is not None:
            at, self._resumed = self._resumed, None
            if at[0] == epoch and 0 < at[1] < len(self.loader):
                return  # the resumed epoch: the loaded state is its position
        self.loader.set_epoch(epoch)

    def skip(self, num_batches: int) -> "_TrainerLoader":
        """The Trainer's resume skips `num_batches` of this epoch: they are
        already behind the loaded state (checked, nothing is read)."""
        if self._resumed is None:
            raise RuntimeError(f"the Trainer resumes {num_batches} batches into an epoch, but the checkpoint "
                               f"holds no feedline loader state ({STATE_FILE}): it was not written by "
                               "FeedlineTrainer, so the position cannot be restored without re-reading")
        if self._resumed[1] != num_batches:
            raise RuntimeError(f"the checkpoint's feedline loader state is at batch {self._resumed[1]} of epoch "
                               f"{self._resumed[0]}, but the Trainer resumes at batch {num_batches}: the "
                               "checkpoint folder mixes two runs, or batch size, gradient accumulation or "
                               "world size changed")
        return self


@contextlib.contextmanager
def _positioned_skip() -> Iterator[None]:
    original = _trainer_module.skip_first_batches

    def skip_first_batches(dataloader: Any, num_batches: int = 0) -> Any:
        if isinstance(dataloader, _TrainerLoader):
            return dataloader.skip(num_batches)
        return original(dataloader, num_batches)

    _trainer_module.skip_first_batches = skip_first_batches
    try:
        yield
    finally:
        _trainer_module.skip_first_batches = original


class _SaveLoaderState(TrainerCallback):
    def __init__(self, loader: _TrainerLoader) -> None:
        self.loader = loader

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        folder = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        os.makedirs(folder, exist_ok=True)
        save_state(self.loader.loader.state_dict(), os.path.join(folder, STATE_FILE))


class FeedlineTrainer(Trainer):
    """transformers.Trainer training on `train_loader` (a feedline.Loader,
    TokenLoader or a Doctor-watched one) instead of a DataLoader over
    `train_dataset`; everything else is the Trainer's. Batches are dicts
    whose keys are the model's forward arguments (feedline's `fields=`
    names them)."""

    def __init__(self, *args: Any, train_loader: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.train_loader = _TrainerLoader(train_loader)
        self.add_callback(_SaveLoaderState(self.train_loader))

    def get_train_dataloader(self) -> Any:
        return self.train_loader

    def train(self, resume_from_checkpoint: Any = None, *args: Any, **kwargs: Any) -> Any:
        if resume_from_checkpoint is not None and resume_from_checkpoint is not False:
            if resume_from_checkpoint is True:
                resume_from_checkpoint = transformers.trainer_utils.get_last_checkpoint(self.args.output_dir)
                if resume_from_checkpoint is None:
                    raise ValueError(f"no checkpoint to resume from in {self.args.output_dir}")
            path = os.path.join(str(resume_from_checkpoint), STATE_FILE)
            if os.path.isfile(path):
                self.train_loader.resume(load_state(path))
        with _positioned_skip():
            return super().train(resume_from_checkpoint, *args, **kwargs)


class DoctorCallback(TrainerCallback):
    """The doctor inside Trainer.train (a FeedlineTrainer's loader or the
    plain Trainer's DataLoader): per optimizer step, the wait for its
    batches (the Trainer fetches a step's gradient-accumulation batches
    before on_step_begin) and the step; the Trainer's logging, evaluation
    and checkpoint saving after a step count as the step's. At the end of
    train() every rank calls the report (rank 0 prints and writes it)."""

    def __init__(self, doctor: Optional[Doctor] = None, file: Any = "stdout", json: Any = None, html: Any = None,
                 trace: Any = None, **doctor_kwargs: Any) -> None:
        self.doctor = doctor if doctor is not None else Doctor(**doctor_kwargs)
        self._out = {"file": sys.stdout if file == "stdout" else file, "json": json, "html": html, "trace": trace}
        self._hooks: Any = None
        self._samples = 0
        self._busy_until: Optional[float] = None
        self.report: Any = None

    def on_epoch_begin(self, args: Any, state: Any, control: Any, model: Any = None, train_dataloader: Any = None,
                       **kwargs: Any) -> None:
        if self._hooks is None:
            loader = getattr(train_dataloader, "loader", train_dataloader)
            net = getattr(model, "module", model)
            site = loop_site("Transformers", "transformers", "Trainer.train",
                             type(net).forward if net is not None else None)
            self._hooks = self.doctor.hooks(loader, site)
            bs = getattr(loader, "batch_size", None) or args.per_device_train_batch_size
            self._samples = int(bs) * int(args.gradient_accumulation_steps)
        self._hooks.epoch_start()
        self._busy_until = None

    def _flush(self) -> None:
        if self._busy_until is not None:
            self._hooks.batch_end(at=self._busy_until)
            self._busy_until = None

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._hooks is None:
            return
        self._flush()
        self._hooks.batch_start(samples=self._samples)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._hooks is not None:
            self._busy_until = time.perf_counter()

    def _still_busy(self) -> None:
        if self._busy_until is not None:
            self._busy_until = time.perf_counter()

    def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._still_busy()

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._still_busy()

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._still_busy()

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._hooks is not None:
            self._flush()
            self._hooks.epoch_end()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._hooks is None:
            return
        self._flush()
        self._hooks.epoch_end()
        self.report = self.doctor.report(**self._out)
        self.doctor.detach()
