"""feedline on Ray (docs/ray.md): Ray Data operators and Ray Train ingest.

Ray Data, decode and augment on CPU actors (a feedline engine per actor):

    ds = ray.data.read_parquet("s3://bucket/train/")          # or read_binary_files, read_webdataset
    ds = ds.map_batches(FeedlineMapper, batch_format="pyarrow", concurrency=8, num_cpus=4,
                        fn_constructor_kwargs={"transform": compose, "label": "label"})

Ray Train, per-worker loaders (TorchTrainer sets up torch.distributed, from
which a feedline.Loader takes its rank and world) with the loader's
position in Ray Train's checkpoints:

    loader = feedline.Loader(source, batch_size=64, transform=compose)
    restore_loader(loader)                                    # from ray.train.get_checkpoint(), if any
    ...
    save_loader(loader, folder); ray.train.report(metrics, checkpoint=Checkpoint.from_directory(folder))
"""
from __future__ import annotations

import logging
import os
import struct
import zlib
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
import pyarrow as pa

from ..loader import Loader
from . import STATE_FILE, load_state, save_state

_LOG = logging.getLogger("feedline.ray")
_IMAGE_COLUMNS = ("image", "bytes", "jpg", "jpeg", "png", "webp")


def _cpus() -> int:
    """The CPUs Ray reserved for this actor (its threads stay inside them)."""
    try:
        import ray
        n = ray.get_runtime_context().get_assigned_resources().get("CPU", 1)
    except Exception:  # noqa: BLE001 - outside Ray: one thread
        n = 1
    return max(1, int(round(n)))


class FeedlineMapper:
    """A Ray Data `map_batches` callable class: one feedline engine per
    actor decodes and transforms each batch of encoded images (any recipe
    feedline runs: a torchvision Compose it translates, its native
    transforms) in its own threads, `num_threads` (default: the CPUs Ray
    reserved for the actor). Use batch_format="pyarrow" (the batch reaches
    feedline as Arrow without a copy); "numpy" works too.

    Args:
        transform: the recipe, as for feedline.Loader.
        image: the column of encoded images: binary, or a {bytes, path}
            struct (Hugging Face's Image); default: the first of image,
            bytes, jpg, jpeg, png, webp present (read_parquet,
            read_binary_files, read_webdataset).
        label: an integer column to pass on as "label".
        classes: instead, labels from the parent folder of each row's
            "path" (read_binary_files(include_paths=True) over an
            ImageFolder): the index of that name in `classes`.
        keep: columns passed through unchanged (ids, captions, paths).
        seed, epoch: random transforms are drawn per row from (seed,
            epoch, the batch's first image, the row's place in the batch),
            the same on any actor and after a retry; pass the epoch to get
            new draws each epoch.
        max_errors: rows that fail to decode or transform may be skipped
            up to this many per batch (each logged with its reason, the
            kept columns follow); 0 (default): the batch fails naming the
            row and reason, and Ray's task retry policy applies.

    Returns per batch {"image": float32/uint8 [B, C, H, W], "label": int64
    [B] (when asked), kept columns}: ndarrays, which Ray stores as Arrow
    tensor columns (no per-sample pickling).
    """

    def __init__(self, transform: Any = None, image: Optional[str] = None, label: Optional[str] = None,
                 classes: Optional[Sequence[str]] = None, keep: Sequence[str] = (), num_threads: Optional[int] = None,
                 seed: int = 0, epoch: int = 0, max_errors: int = 0) -> None:
        if label is not None and classes is not None:
            raise ValueError("FeedlineMapper: give label (a column) or classes (labels from paths), not both")
        self.transform, self.image, self.label = transform, image, label
        self.classes = {c: i for i, c in enumerate(classes)} if classes is not None else None
        self.keep, self.seed, self.epoch, self.max_errors = list(keep), int(seed), int(epoch), int(max_errors)
        self.num_threads = int(num_threads) if num_threads else _cpus()
        self.rows = 0     # rows this actor delivered
        self.skipped = 0  # rows it skipped (max_errors > 0)

    def _table(self, batch: Union[pa.Table, Mapping[str, Any]]) -> pa.Table:
        if isinstance(batch, pa.Table):
            return batch
        cols = {}
        for k, v in batch.items():
            v = np.asarray(v)
            cols[k] = pa.array(list(v), pa.binary()) if v.dtype == object and len(v) and \
                isinstance(v[0], (bytes, bytearray)) else pa.array(v.tolist() if v.ndim > 1 else v)
        return pa.table(cols)

    def _image_column(self, table: pa.Table) -> str:
        if self.image is not None:
            if self.image not in table.column_names:
                raise KeyError(f"FeedlineMapper: no column {self.image!r} in the batch (it has {table.column_names})")
            return self.image
        for c in _IMAGE_COLUMNS:
            if c in table.column_names:
                return c
        raise KeyError(f"FeedlineMapper: no image column in the batch (looked for {list(_IMAGE_COLUMNS)}; it has "
                       f"{table.column_names}): pass image=")

    def _batch_seed(self, column: pa.ChunkedArray) -> int:
        first = column[0].as_py()
        data = first.get("bytes") if isinstance(first, dict) else first
        head = bytes(data[:4096]) if data else b""
        return zlib.crc32(struct.pack("<qq", self.seed, self.epoch) + head)

    def __call__(self, batch: Union[pa.Table, Mapping[str, Any]]) -> dict[str, np.ndarray]:
        table = self._table(batch)
        n = table.num_rows
        if n == 0:
            return {"image": np.zeros((0,), np.float32)}
        image = self._image_column(table)
        cols = {"image": table.column(image)}
        fields = {"image": "image"}
        if self.label is not None:
            cols["label"] = table.column(self.label)
            fields["label"] = "label"
        elif self.classes is not None:
            if "path" not in table.column_names:
                raise KeyError("FeedlineMapper(classes=...): labels come from a 'path' column "
                               "(read_binary_files(include_paths=True)); the batch has none")
            paths = table.column("path").to_pylist()
            try:
                labels = [self.classes[os.path.basename(os.path.dirname(p))] for p in paths]
            except KeyError as e:
                raise KeyError(f"FeedlineMapper: the folder {e.args[0]!r} of a row's path is not in classes") from None
            cols["label"] = pa.array(labels, pa.int64())
            fields["label"] = "label"
        loader = Loader(pa.table(cols), batch_size=n, transform=self.transform, shuffle=False,
                        seed=self._batch_seed(cols["image"]), num_threads=self.num_threads, fields=fields,
                        max_errors=self.max_errors)
        try:
            got = next(loader.batches())
            ids = np.asarray(got.sample_ids, dtype=np.int64)
            out = {k: v.numpy() for k, v in got.fields.items()}
            if got.skipped:
                self.skipped += len(got.skipped)
                for s in got.skipped:
                    _LOG.warning("FeedlineMapper skipped a row: %s", s)
        finally:
            loader.close()
        for k in self.keep:
            out[k] = table.column(k).take(pa.array(ids)).to_numpy(zero_copy_only=False)
        self.rows += len(ids)
        return out


def save_loader(loader: Any, folder: Union[str, os.PathLike[str]]) -> None:
    """Writes the loader's position into a checkpoint folder (before
    ray.train.report(..., checkpoint=Checkpoint.from_directory(folder)));
    the state is the same on every rank, so rank 0 writing it is enough."""
    save_state(loader.state_dict(), os.path.join(os.fspath(folder), STATE_FILE))


def restore_loader(loader: Any, checkpoint: Any = None) -> bool:
    """Restores the loader from `checkpoint` (default: the one Ray Train
    resumes from, ray.train.get_checkpoint()); its next pass goes on from
    the next batch. False when there is no checkpoint; a checkpoint without
    a loader state is an error naming the folder."""
    if checkpoint is None:
        import ray.train
        checkpoint = ray.train.get_checkpoint()
    if checkpoint is None:
        return False
    with checkpoint.as_directory() as folder:
        path = os.path.join(folder, STATE_FILE)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: the checkpoint holds no feedline loader state (save_loader writes it)")
        loader.load_state_dict(load_state(path))
    return True
