"""The doctor inside a Lightning Trainer (docs/integrations.md).

    trainer = L.Trainer(..., callbacks=[feedline.integrations.lightning.DoctorCallback(html="doctor.html")])

Loading needs nothing from here: a LightningDataModule's train_dataloader()
returns a feedline.Loader, which Lightning leaves unsharded, checkpoints and
restores as it is.
"""
from __future__ import annotations

from typing import Any, Optional

import lightning.pytorch as pl

from ..doctor import Doctor
from . import loop_site


class DoctorCallback(pl.Callback):
    """Watches the Trainer's training loop: the wait for each batch (from
    the end of one `training_step` to the start of the next, Lightning's
    fetch and transfer included) and the step, per epoch; a feedline loader
    is looked into by its probe. At the end of fit every rank calls the
    report (a collective under DDP: rank 0 prints it and writes the files).

    Args:
        doctor: the Doctor to feed (default: a new one, `doctor_kwargs`).
        file, json, html, trace: Doctor.report's outputs; file=None prints nothing.
    """

    def __init__(self, doctor: Optional[Doctor] = None, file: Any = "stdout", json: Any = None, html: Any = None,
                 trace: Any = None, **doctor_kwargs: Any) -> None:
        import sys
        self.doctor = doctor if doctor is not None else Doctor(**doctor_kwargs)
        self._out = {"file": sys.stdout if file == "stdout" else file, "json": json, "html": html, "trace": trace}
        self._hooks: Any = None
        self.report: Any = None  # the Report, once fit ended

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._hooks is None:
            site = loop_site("Lightning", "lightning", "Trainer.fit", type(pl_module).training_step)
            self._hooks = self.doctor.hooks(trainer.train_dataloader, site)
        self._hooks.epoch_start()

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        self._hooks.batch_start(batch)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        self._hooks.batch_end()

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._hooks.epoch_end()

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._hooks is None:
            return
        self._hooks.epoch_end()  # fit stopped mid-epoch (max_steps)
        self.report = self.doctor.report(**self._out)
        self.doctor.detach()
