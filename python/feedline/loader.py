"""feedline.Loader: the PyTorch-facing loader."""
from __future__ import annotations

import atexit
import os
import threading
import weakref
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    Mapping,
    NoReturn,
    Optional,
    SupportsIndex,
    Tuple,
    TypeVar,
    Union,
)

import numpy as np
import torch

from . import _C, _batch, _columnar, _fields, _procworker, _pyops
from . import transforms as _transforms

if TYPE_CHECKING:
    from ._device import DeviceFeeder

_STATE_VERSION = 1

# What Loader accepts as a source: a path (str, bytes or os.PathLike), an http(s):// or s3:// URL;
# Loader also takes a table read in place (TableSource: a datasets.Dataset, a pyarrow Table: docs/columnar.md).
Source = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
TableSource = Any
# What Loader accepts as a device: None (host memory), "cuda", "cuda:1", an index or a torch.device.
Device = Union[str, int, "torch.device", None]
_LoaderT = TypeVar("_LoaderT", bound="Loader")


def _distributed_rank_world() -> Tuple[int, int]:
    """Rank and world size: from an initialised process group, else from the
    RANK / WORLD_SIZE environment variables (torchrun's), else 0 and 1."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    return 0, 1


def _tensor(array: np.ndarray, dtype_name: str) -> torch.Tensor:
    t = torch.from_numpy(array)  # shares the batch buffer: no copy
    if dtype_name == "bfloat16":
        t = t.view(torch.bfloat16)  # carried as int16 through numpy
    return t


@dataclass
class Batch:
    """One batch with everything feedline knows about it. `fields` maps field
    names ("image", "label") to tensors that view the loader's buffer; a
    bytes field (text, JSON, arrays of a `fields=` loader) is a list of
    bytes, one per sample."""
    fields: Dict[str, Any]
    sample_ids: np.ndarray
    epoch: int
    index: int
    num_padding: int = 0
    skipped: List[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.sample_ids)

    def with_fields(self, fields: Dict[str, Any]) -> Batch:
        """The same batch with other tensors (e.g. copies on a device)."""
        return Batch(fields, self.sample_ids, self.epoch, self.index, self.num_padding, self.skipped)


# Every loader not yet closed. At interpreter exit they are closed before
# finalisation starts: a worker thread inside a Python op (which needs the
# GIL) must not meet a finalising interpreter, which ends such threads
# abruptly; module teardown would run __del__ only after that point.
_LIVE: "weakref.WeakSet[Loader]" = weakref.WeakSet()


@atexit.register
def _close_live_loaders() -> None:
    for loader in list(_LIVE):
        try:
            loader.close()
        except Exception:  # noqa: BLE001 - exiting: close every other loader still
            pass


class Loader:
    """Loads images in C++ threads from an image folder or a packed dataset.

    Args:
        source: root of an ImageFolder tree (class sub-folders give labels),
            a dataset directory made by `feedline pack` (has manifest.json),
            WebDataset tar shards (a .tar file or a directory of them;
            labels from .cls members), or the http(s):// URL of a packed
            dataset (read with range requests); Parquet or Arrow IPC files
            (a .parquet/.arrow file, a folder or pattern of them, an s3://
            prefix, a `save_to_disk` folder) or a datasets.Dataset / pyarrow
            Table read in place, columns as fields (docs/columnar.md).
        batch_size: samples per batch on this rank.
        transform: from feedline.transforms (default imagenet_train(224)),
            or a torchvision Compose (v1 or v2) or one of its members,
            translated into the native transform with its parameters
            (feedline.transforms.from_torchvision); members with no native
            equivalent (your own classes, lambdas, RandomPerspective, ...) run
            as Python ops on the worker threads, given what torchvision
            would give them there (docs/python_ops.md); the output shape is
            learned by running the first sample once at creation.
            `transform_source` then records the translation.
            With `fields`, it applies to every image field, or give a dict
            {field name: transform}.
        strict: refuse Python fallbacks: a member with no native equivalent
            raises UnsupportedTransformError naming it.
        map: fn(sample dict) -> sample dict, per sample on the worker
            threads after the native ops ({"image": tensor, "label": int},
            or the sample's fields); same keys, shapes learned from the
            first sample at creation (docs/python_ops.md).
        python_workers: 0 (default) runs a Compose's Python members on the
            worker threads, under the GIL. N > 0 runs them in N worker
            processes started now, fed through shared memory (pixels are
            never pickled), so they scale past one core; same seed, same
            bytes as with 0 (docs/python_ops.md, "Python ops in worker
            processes"). Only for a transform with Python members, not with
            map= (which stays on the threads) or fields=.
        python_workers_start_method: "fork" (default on Linux, as torch's
            DataLoader), "spawn" or "forkserver"; the last two pickle the
            transform's members to the workers.
        batch_map: fn(batch) -> anything, on each collated batch (the
            dict, or the (images, labels) pair), on a background thread
            feeding the loop through a queue of one batch.
        shuffle_window: for Parquet/Arrow sources, rows are shuffled within
            windows of this many row groups (the groups in a random order),
            so each group is read once per epoch; None: as many as half
            the cache (read_ahead_bytes, default 256 MiB) holds, up to 64.
        batch_transform: MixUp or CutMix (torchvision.transforms.v2's or
            feedline.transforms'), or a RandomChoice of them: run natively
            on each batch before it is handed out (before batch_map and the
            device copy); labels become (batch, num_classes) float32 soft
            labels. Its parameters come from (seed, epoch, rank, batch
            index), so they survive resumes (docs/augmentations.md).
        fields: samples with several named fields (docs/fields.md), e.g.
            {"image": "jpg;png", "label": "cls", "caption": "txt", "meta":
            "json", "depth": "npy"}: each value lists the parts of a sample
            that may hold the field (WebDataset member extensions, first
            present wins); the first part's name gives its kind (image
            extensions, cls, txt, json, npy; anything else raw bytes) unless
            the value starts with "<kind>:" ("text:caption", "bytes:jpg").
            "op:<name>(<key>=<value>, ...):<parts>" runs a registered C++
            op (feedline.registered_ops(), feedline.load_ops(path);
            docs/custom_ops.md) and yields what it declares (tensors, or
            lists of bytes). An image folder's samples have one part named by the file's
            extension, and their label. Iterating then yields a dict per
            batch: images as tensors shaped by their transform, labels int64
            tensors, text lists of str, JSON lists of values, ndarrays stacked
            (or lists with collate="list"), bytes lists of bytes. A sample
            missing a field, or whose part is not what its kind says, is a
            sample error naming both (skipped and counted under max_errors).
        collate: "stack" (default) or "list": how ndarray fields are batched.
        shuffle: a new random order every epoch (from seed and epoch).
        seed: seeds the order and every augmentation; same seed, same bytes.
        drop_last: drop the tail that does not fill a (global) batch; without
            it the last batch is short and ranks are padded to equal length.
        num_threads: worker threads. "auto" (default): the tuner runs as many
            as keep your loop fed, up to cpu_budget; the cores your step
            burns (measured) are lent to workers only while your loop waits
            for a batch; stats()["tuner"] shows its choices.
        cpu_budget: cores the tuner may use; None = the cores in this
            process's affinity mask and cgroup quota (docs/tuner.md, "The
            trainer's cores").
        prefetch_batches: batches prepared ahead of the one your loop holds.
            "auto" (default): start at 2 and grow when your loop waits on a
            ring too shallow for the jitter (or keeps batches), within
            ram_budget. A number n fixes the ring at n + 1 buffers, and that
            many batches is then the memory bound (batches you keep count).
        ram_budget: bytes the loader may hold: batch buffers, read-ahead and
            the workers' decode scratch. None = a quarter of the memory
            available to the process. A budget too small for one batch is an
            error naming the bytes needed. (max_bytes is an older name.)
        max_errors: bad samples (corrupt files) skipped and counted before
            failing; 0 fails on the first, naming file and reason.
        timeout: seconds one operation on one sample may take before the
            loader fails naming it; 0 = no limit.
        rank, world_size: default from torch.distributed or RANK/WORLD_SIZE.
        elastic: accept states saved at another world size with the same
            global batch size (batch_size x world_size).
        http_timeout: for http(s):// sources, seconds to connect, and seconds
            a transfer may stall, before the attempt fails.
        http_retries: further attempts per request after a failure, with
            exponential backoff; then the error names the URL and range.
        read_ahead_bytes: for packed datasets and s3:// image folders,
            samples fetched ahead of the workers in the loader's order within
            this many bytes (taken out of max_bytes); None = 64 MiB for URLs
            and buckets, 0 for local files (the page cache reads ahead).
        read_ahead_threads: fetches in flight at most.
        endpoint_url: for s3:// sources, the S3-compatible server (MinIO,
            Ceph, R2, a local moto); None = AWS_ENDPOINT_URL_S3,
            AWS_ENDPOINT_URL, the profile's, else AWS. Credentials, region
            and profile come from the AWS environment variables and files
            (docs/object_stores.md).
        s3_anonymous: unsigned S3 requests, for public buckets.
        skip_hidden_dirs: for image folders, leave out directories whose
            name starts with "." (``.ipynb_checkpoints``, ``.git``), as
            classes and inside classes. Off by default: the listing is then
            exactly torchvision's ImageFolder (``classes``, ``samples``).
        device: None keeps batches in host memory (zero copy). A CUDA
            device ("cuda", "cuda:1", torch.device) delivers them there: the
            ring's buffers are pinned in place, each batch is copied on a
            side stream while your step runs on the previous one, and your
            current stream waits for the copy before you get the batch. Two
            more buffers are kept (the copy in flight and the next batch).

    Iterating yields (images, labels) tensors for one epoch; the next
    iteration runs the next epoch. Tensors view the loader's batch buffers,
    which are recycled only once released, so keeping them is safe (it costs
    backpressure, within prefetch_batches).
    """

    def __init__(self, source: Union[Source, TableSource], batch_size: int = 256, transform: Optional[Any] = None,
                 shuffle: bool = False, seed: int = 0, drop_last: bool = False,
                 num_threads: Union[int, str] = "auto", prefetch_batches: Union[int, str] = "auto",
                 ram_budget: Optional[int] = None, max_errors: int = 0, timeout: float = 0.0,
                 rank: Optional[int] = None, world_size: Optional[int] = None, elastic: bool = False,
                 http_timeout: float = 10.0, http_retries: int = 3, read_ahead_bytes: Optional[int] = None,
                 read_ahead_threads: int = 8, endpoint_url: Optional[str] = None, s3_anonymous: bool = False,
                 device: Device = None, cpu_budget: Optional[int] = None,
                 max_bytes: Optional[int] = None, skip_hidden_dirs: bool = False, strict: bool = False,
                 fields: Optional[Mapping[str, _fields.FieldValue]] = None, collate: str = "stack",
                 map: Optional[Callable[[Dict[str, Any]], Dict[str, Any]]] = None,
                 batch_map: Optional[Callable[[Any], Any]] = None, batch_transform: Optional[Any] = None,
                 python_workers: int = 0, python_workers_start_method: Optional[str] = None,
                 shuffle_window: Optional[int] = None, _raw_max_bytes: int = 0,
                 _pipeline: Optional[_C.Pipeline] = None) -> None:
        if rank is None or world_size is None:
            r, w = _distributed_rank_world()
            rank = r if rank is None else rank
            world_size = w if world_size is None else world_size
        o = _C.LoaderOptions()
        o.batch_size = batch_size
        o.shuffle = shuffle
        o.seed = seed
        o.drop_last = drop_last
        # 0 is accepted for "auto" too (it meant "all cores" before the tuner).
        if num_threads != "auto" and int(num_threads) < 0:
            raise ValueError(f'num_threads must be "auto" or >= 1, got {num_threads!r}')
        o.num_threads = 0 if num_threads == "auto" else int(num_threads)
        if cpu_budget is not None and int(cpu_budget) < 1:
            raise ValueError(f"cpu_budget must be >= 1, got {cpu_budget}")
        o.cpu_budget = 0 if cpu_budget is None else int(cpu_budget)
        auto_ring = prefetch_batches == "auto"
        if not auto_ring and int(prefetch_batches) < 1:
            raise ValueError(f'prefetch_batches must be "auto" or >= 1, got {prefetch_batches!r}')
        # A for loop still holds the previous batch while asking for the next
        # one: one buffer more than the batches prepared ahead.
        o.ring_depth = 0 if auto_ring else int(prefetch_batches) + 1
        if ram_budget is not None and max_bytes is not None:
            raise ValueError("give ram_budget or its older name max_bytes, not both")
        if ram_budget is None:
            ram_budget = max_bytes
        if ram_budget is not None and int(ram_budget) < 1:
            raise ValueError(f"ram_budget must be a positive number of bytes or None (auto), got {ram_budget}")
        o.max_bytes = 0 if ram_budget is None else int(ram_budget)
        self._feeder: Optional[DeviceFeeder] = None
        if device is not None and torch.device(device).type != "cpu":
            from ._device import DeviceFeeder
            self._feeder = DeviceFeeder(device)
            # The batch being copied and the one fetched behind it.
            if auto_ring:
                o.auto_ring_start = 4
            else:
                o.ring_depth = int(prefetch_batches) + 2
        self.device = self._feeder.device if self._feeder is not None else None
        o.error_policy = _C.ErrorPolicy.SKIP if max_errors > 0 else _C.ErrorPolicy.RAISE
        o.max_errors = max_errors
        o.stall_timeout_ms = int(timeout * 1000)
        o.rank, o.world_size = rank, world_size
        o.elastic = elastic
        # A str, as torchvision holds it (bytes paths are decoded as
        # os.fsdecode does; "~" expanded as make_dataset does); the core
        # gets the file system's bytes back, so no name is lost.
        # A datasets.Dataset or an Arrow table is read in place (docs/columnar.md).
        table = _columnar.table_of(source)
        self.source = table[0] if table is not None else os.path.expanduser(os.fsdecode(os.fspath(source)))
        self.batch_size, self.rank, self.world_size = batch_size, rank, world_size
        if collate not in _fields.COLLATES:
            raise ValueError(f"collate must be one of {_fields.COLLATES}, got {collate!r}")
        self.collate = collate
        # Before any thread or file is opened: a refused argument costs nothing.
        self.fields: Optional[List[_fields.Field]] = None if fields is None else _fields.parse(fields)
        http = _C.HttpOptions()
        http.connect_timeout_ms = http.stall_timeout_ms = int(http_timeout * 1000)
        http.max_attempts = 1 + int(http_retries)
        if endpoint_url is not None:
            http.s3.endpoint_url = str(endpoint_url)
        if s3_anonymous:
            http.s3.anonymous = True
        columnar = table is not None or (self.fields is not None and _C.source_kind(self.source, http) == "columnar")
        if columnar and self.fields is not None:
            # Parts are columns; a field's kind is its column's (Arrow type).
            assert fields is not None
            self.fields = _fields.parse(fields, _columnar.column_kinds(self.source, http,
                                                                       None if table is None else table[1]))
        # What a torchvision transform was translated into (None for a native one).
        self.transform_source: Optional[_transforms.Translation] = None
        field_transforms: Dict[str, Any] = {}
        # fields=: the image fields whose Compose has Python members, each run as its own chain.
        field_chains: List[Tuple[str, _C.ImageChain]] = []
        if self.fields is not None and isinstance(transform, Mapping):
            images = [f.name for f in self.fields if f.kind == "image"]
            unknown = sorted(set(transform) - set(images))
            if unknown:
                raise ValueError(f"transform names {unknown}, which are not image fields (image fields: "
                                 f"{sorted(images)})")
            for name in images:
                field_transforms[name], t_src = _native_transform(transform.get(name), strict)
                if t_src is not None and t_src.chain is not None:
                    field_chains.append((name, t_src.chain))
            self.transform = next(iter(field_transforms.values()), _transforms.imagenet_train())
        else:
            self.transform, self.transform_source = _native_transform(transform, strict)
            if self.fields is not None:
                field_transforms = {f.name: self.transform for f in self.fields if f.kind == "image"}
                if self.transform_source is not None and self.transform_source.chain is not None:
                    field_chains = [(name, self.transform_source.chain) for name in field_transforms]
        src = _C.SourceOptions()
        src.http = http
        if shuffle_window is not None:
            if int(shuffle_window) < 1:
                raise ValueError(f"shuffle_window must be >= 1 row groups or None (from the cache), got "
                                 f"{shuffle_window}")
            src.shuffle_window = int(shuffle_window)
        if read_ahead_bytes is not None:
            src.read_ahead_bytes = int(read_ahead_bytes)
        src.read_ahead_threads = int(read_ahead_threads)
        src.skip_hidden_dirs = bool(skip_hidden_dirs)
        spec = _C.SampleSpec()
        if self.fields is not None:
            src.parts = True
            # In a CSV/JSONL list, these fields' columns hold file paths.
            src.list_file_columns = sorted({p for f in self.fields if f.kind in ("image", "ndarray", "bytes", "op")
                                            for p in f.parts})
            spec.output = _C.SampleSpec.Output.FIELDS
            spec.fields = _fields.requests(self.fields, field_transforms)
            src.columns = sorted({p for f in self.fields for p in f.parts})
        elif _raw_max_bytes > 0:
            spec.output = _C.SampleSpec.Output.RAW_BYTES
            spec.max_record_bytes = int(_raw_max_bytes)
        else:
            spec.transform = self.transform
        if table is not None:
            co = _C.ColumnarOptions()
            co.parts, co.columns, co.http = src.parts, list(src.columns), http
            if read_ahead_bytes is not None:
                co.cache_bytes = int(read_ahead_bytes)
            co.shuffle_window = src.shuffle_window
            src.columnar = _columnar.from_table(table[0], table[1], co)
        recipe = _C.PyRecipe()
        if self.fields is not None:
            recipe.field_chains = field_chains
        elif self.transform_source is not None and self.transform_source.chain is not None:
            recipe.chain = self.transform_source.chain
        if map is not None:
            if not callable(map):
                raise TypeError(f"map must be callable, got {type(map).__name__}")
            if self.fields is not None:
                if any(f.kind == "op" for f in self.fields):
                    raise ValueError("map= with op fields (fields={...: 'op:...'}) is not supported yet")
                names, kinds = [f.name for f in self.fields], [f.kind for f in self.fields]
                fixed = None  # a dict per batch: the map may add, drop or change fields
            elif _raw_max_bytes > 0:
                names, kinds = ["bytes", "length", "label"], ["tensor", "label", "label"]
                fixed = names  # (bytes, lengths, labels) per batch
            else:
                names, kinds = ["image", "label"], ["image", "label"]
                fixed = names  # (images, labels) per batch
            map_run = _pyops.MapRunner(map, names, kinds, fixed)
            recipe.map = map_run
        if batch_map is not None:
            if not callable(batch_map):
                raise TypeError(f"batch_map must be callable, got {type(batch_map).__name__}")
            if self._feeder is not None:
                raise ValueError("batch_map with device= is not supported: move the tensors in batch_map itself")
        self._batch_map = batch_map
        self._mixer: Optional[_batch.LoaderMixer] = None
        if batch_transform is not None:
            if self.fields is not None or _raw_max_bytes > 0 or _pipeline is not None:
                raise ValueError("batch_transform needs an (images, labels) loader (not fields=, RecordLoader "
                                 "or TokenLoader)")
            split = self.transform_source is not None and self.transform_source.chain is not None
            # A split Compose's layout is its Python members' (read from the batch's shape).
            self._mixer = _batch.LoaderMixer(batch_transform, seed, rank, world_size,
                                             None if split else self.transform.layout,
                                             None if split else self.transform.dtype)
        self._batch_map_thread: Optional[_pyops.BatchMapThread] = None
        self._batch_map_state: Optional[bytes] = None
        self.python_workers = _python_workers(python_workers, recipe, map, _pipeline, bool(field_chains))
        self._python_pool: Optional[_procworker.ProcessPool] = None
        if self.python_workers > 0:
            chain = recipe.chain
            assert chain is not None  # _python_workers refused the rest
            # Started before the engine's threads, so that fork copies none of them.
            self._python_pool = _procworker.ProcessPool(chain.run, self.python_workers, python_workers_start_method)
            recipe.workers = self._python_pool.cpp
        # A pipeline from another recipe (feedline.TokenLoader's windows) replaces the source's.
        try:
            if _pipeline is not None:
                self._options = o  # feedline.TokenLoader rebuilds its mixture on resume
                if map is not None:
                    raise ValueError("map is not supported by this loader")
                self._loader = _C.Loader(_pipeline, o)
            else:
                self._loader = _C.Loader(os.fsencode(self.source), spec, o, src, recipe)
        except BaseException as e:
            if self._python_pool is not None:
                dead = self._python_pool.dead()
                self._python_pool.close()
                if dead:
                    raise _procworker.PythonWorkerError(dead) from e
            raise
        self._out_fields: Optional[List[_fields.Field]] = self.fields
        if map is not None and self.fields is not None:
            # The fields as the map returns them (learned from the first
            # sample at creation): what each batch's dict holds.
            assert map_run.out_names is not None and map_run.out_kinds is not None
            parts = {f.name: f.parts for f in self.fields}
            self._out_fields = [_fields.Field(n, k, parts.get(n, []))
                                for n, k in zip(map_run.out_names, map_run.out_kinds)]
        _LIVE.add(self)
        self._samples: Optional[List[Tuple[str, int]]] = None
        self._resume_pending = False
        self._mid_epoch = False
        self._last_index = -1
        # One pass over the loader at a time (reliability item 37): the
        # number of the newest pass and the thread running it, None once it
        # ended. A loop whose number is no longer the newest stops with an
        # error instead of taking the newer pass's batches.
        self._pass_lock = threading.Lock()
        self._pass_number = 0
        self._pass_thread: Optional[threading.Thread] = None
        self._batch_map_owner: Optional[threading.Thread] = None

    # -- torch DataLoader vocabulary -------------------------------------
    def __len__(self) -> int:
        return self._loader.num_batches

    def __iter__(self) -> Iterator[Any]:
        """(images, labels) per batch; with `fields`, a dict per batch;
        with `batch_map`, what it returns for each."""
        if self._batch_map is not None:
            yield from self._batch_mapped()
            return
        yield from self._collated()

    def _collated(self) -> Iterator[Any]:
        if self.fields is not None:
            yield from self._field_dicts()
            return
        for batch in self.batches():
            pair = batch.fields["image"], batch.fields["label"]
            del batch  # a suspended generator frame must not pin a buffer
            yield pair
            del pair

    def _field_dicts(self) -> Iterator[Dict[str, Any]]:
        assert self._out_fields is not None
        for batch in self.batches():
            out = _fields.collate(self._out_fields, batch.fields, batch.sample_ids, self.collate)
            del batch
            yield out
            del out

    def _with_states(self) -> Iterator[Tuple[Any, bytes]]:
        # Each batch with the engine's position right after it: the state to
        # save once the loop has taken it (the thread runs ahead of the loop).
        for item in self._collated():
            yield item, self._loader.state()
            del item

    def _batch_mapped(self) -> Iterator[Any]:
        assert self._batch_map is not None
        # The host loop runs on the batch-map thread, so the one-consumer
        # rule of _begin_pass is checked here, for the thread of the loop.
        me = threading.current_thread()
        with self._pass_lock:
            running, owner = self._batch_map_thread, self._batch_map_owner
            if running is not None and owner is not None and owner is not me and owner.is_alive():
                raise RuntimeError(self._second_consumer(owner, me))
            self._batch_map_owner = me
        self._stop_batch_map()
        self._batch_map_state = self._loader.state() if self._resume_pending else None
        thread = _pyops.BatchMapThread(self._with_states(), self._batch_map)
        self._batch_map_thread = thread
        try:
            while True:
                if self._batch_map_thread is not thread:
                    raise RuntimeError(self._superseded())
                kind, value, state = thread.get()
                if kind == "end":
                    self._batch_map_state = None
                    return
                if kind == "error":
                    raise value
                self._batch_map_state = state
                yield value
                del value
        finally:
            if self._batch_map_thread is thread:
                self._stop_batch_map()

    def _stop_batch_map(self) -> None:
        thread, self._batch_map_thread = self._batch_map_thread, None
        if thread is not None:
            thread.close()

    def set_epoch(self, epoch: int) -> None:
        """Starts epoch `epoch` at its first batch (as DistributedSampler.set_epoch)."""
        self._loader.set_epoch(int(epoch))
        self._mid_epoch = False
        self._resume_pending = False
        self._last_index = -1

    @property
    def epoch(self) -> int:
        return self._loader.epoch

    @property
    def position(self) -> Tuple[int, int]:
        """(epoch, next batch): where the next batch comes from, as
        state_dict() saves it (after load_state_dict, the restored one)."""
        e, b = self._loader.position
        return int(e), int(b)

    @property
    def classes(self) -> List[str]:
        """Class names sorted; index = label (torchvision's ImageFolder.classes).
        Names that are not UTF-8 are decoded as os.fsdecode does."""
        return list(self._loader.classes)

    @property
    def class_to_idx(self) -> Dict[str, int]:
        """{class name: label}, as torchvision's ImageFolder.class_to_idx."""
        return {name: i for i, name in enumerate(self._loader.classes)}

    @property
    def samples(self) -> Optional[List[Tuple[str, int]]]:
        """For an image folder, [(path, label)] in sample-id order: equal to
        torchvision's ImageFolder(source).samples. None for packed datasets
        and tar shards."""
        if self._samples is None:
            self._samples = self._loader.samples
        return None if self._samples is None else list(self._samples)

    @property
    def num_threads(self) -> int:
        return self._loader.num_threads

    def batches(self) -> Iterator[Batch]:
        """Iterates one epoch of Batch objects (fields by name, sample ids,
        epoch, index, padding, skipped samples), on `device` when set."""
        if self._feeder is None:
            yield from self._host_batches()
            return
        yield from self._on_device(self._host_batches(with_buffer=True))

    def _next(self, cu_seqlens: bool = False) -> Any:
        # cu_seqlens: a token batch's segment starts come joined (feedline.TokenLoader).
        pool = getattr(self, "_python_pool", None)
        if pool is None:
            return self._loader.next(cu_seqlens=cu_seqlens)
        # A dead worker stops the loader whatever max_errors says: every
        # sample sent to it would fail.
        try:
            d = self._loader.next(cu_seqlens=cu_seqlens)
        except Exception as e:
            dead = pool.dead()
            if dead:
                raise _procworker.PythonWorkerError(dead) from e
            raise
        dead = pool.dead()
        if dead:
            raise _procworker.PythonWorkerError(dead)
        return d

    def _on_device(self, host_batches: Iterator[Tuple[Batch, Tuple[int, int]]]) -> Iterator[Batch]:
        """The device path shared by every loader (images, fields, tokens):
        each (host Batch, its ring buffer) of `host_batches` is copied on the
        feeder's side stream one batch ahead and handed out once the current
        stream waits for its copy. The host batches may carry tensors outside
        the buffer too (feedline.TokenLoader's cu_seqlens): they are copied
        the same way and kept until their copy is done."""
        feeder = self._feeder
        assert feeder is not None
        ahead: Optional[Tuple[Batch, Any]] = None  # (device batch, event): copy issued, not yet handed out
        try:
            for host, buffer in host_batches:
                submitted = feeder.submit(host, buffer)
                del host
                if ahead is not None:
                    out = feeder.ready(*ahead)
                    ahead = None
                    yield out
                    del out
                ahead = submitted
                del submitted
                # Only the newest copy may still be running when the engine
                # is asked for the next batch.
                feeder.retire(keep=1)
            if ahead is not None:
                out = feeder.ready(*ahead)
                ahead = None
                yield out
                del out
        finally:
            ahead = None
            feeder.retire(keep=0)

    def _begin_pass(self) -> int:
        """Where a new pass over the loader starts (every host loop calls it
        first); returns the pass's number for _check_pass and _end_pass.

        A loader has one consumer. A pass begun while another thread's pass
        is still running is refused (two threads each looping over
        `batches()` would otherwise restart each other's epoch and share its
        batches out twice); a pass begun by the same thread supersedes the
        older one, whose loop then raises instead of taking batches of the
        new pass."""
        me = threading.current_thread()
        with self._pass_lock:
            owner = self._pass_thread
            if owner is not None and owner is not me and owner.is_alive():
                raise RuntimeError(self._second_consumer(owner, me))
            self._pass_number += 1
            self._pass_thread = me
            number = self._pass_number
        if self._mid_epoch and not self._resume_pending:
            if self._last_index == len(self) - 1:
                # The last pass got every batch but stopped before seeing the
                # end (zip, islice, counting to len): the epoch is complete.
                end = self._loader.next()
                assert end is None, "a batch after the last one of the epoch"
            else:
                # A new iterator after an abandoned one restarts the epoch, as
                # torch's DataLoader does; after load_state_dict it resumes.
                self._loader.set_epoch(self._loader.epoch)
        self._resume_pending = False
        self._last_index = -1
        return number

    @staticmethod
    def _second_consumer(owner: threading.Thread, me: threading.Thread) -> str:
        return (f"this loader is already being iterated by thread {owner.name!r}: a loader has one consumer, "
                f"so thread {me.name!r} may not start another pass over it; iterate it from one thread, or "
                "give each thread its own loader (with rank/world_size to split the samples)")

    @staticmethod
    def _superseded() -> str:
        return ("this iterator over the loader was superseded: a newer iter()/batches() pass began (it "
                "restarted or resumed the epoch), so this one would hand out the newer pass's batches; "
                "keep one iterator per pass")

    def _check_pass(self, number: int) -> None:
        if self._pass_number != number:
            raise RuntimeError(self._superseded())

    def _end_pass(self, number: int) -> None:
        with self._pass_lock:
            if self._pass_number == number:
                self._pass_thread = None

    def _host_batches(self, with_buffer: bool = False, cu_seqlens: bool = False) -> Iterator[Any]:
        # Batch, or (Batch, (buffer address, bytes)) with_buffer.
        number = self._begin_pass()
        try:
            yield from self._host_pass(number, with_buffer, cu_seqlens)
        finally:
            self._end_pass(number)

    def _host_pass(self, number: int, with_buffer: bool, cu_seqlens: bool) -> Iterator[Any]:
        while True:
            self._check_pass(number)
            d = self._next(cu_seqlens)
            if d is None:
                self._mid_epoch = False
                return
            self._mid_epoch = True
            fields = {name: (a if dt == "bytes" else _tensor(a, dt))
                      for name, a, dt in zip(d["names"], d["fields"], d["dtypes"])}
            if self._mixer is not None:
                fields = self._mixer(fields, d["epoch"], d["index"], d["sample_ids"])
            batch = Batch(fields, d["sample_ids"], d["epoch"], d["index"], d["num_padding"], d["skipped"])
            self._last_index = batch.index
            buffer = d["buffer"]
            # Only the caller may hold this batch while the next one is
            # fetched: locals of a suspended generator would pin its buffer
            # and starve the ring.
            del d, fields
            yield (batch, buffer) if with_buffer else batch
            del batch

    # -- resume ------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """The position before the next batch: small, versioned, no data."""
        if self._batch_map_state is not None:  # batch_map's thread may have taken batches ahead
            return {"version": _STATE_VERSION, "sampler": self._batch_map_state}
        return {"version": _STATE_VERSION, "sampler": self._loader.state()}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continues from `state` (the next iteration resumes mid-epoch).
        Raises ValueError when seed, dataset size or options differ."""
        self._stop_batch_map()
        self._batch_map_state = None
        if not isinstance(state, dict) or state.get("version") != _STATE_VERSION:
            version = state.get("version") if isinstance(state, dict) else None
            raise ValueError(f"not a feedline loader state (version {version}, this build reads {_STATE_VERSION})")
        self._loader.restore(state["sampler"])
        self._resume_pending = True
        self._mid_epoch = True
        self._last_index = -1

    # -- diagnostics and lifetime ------------------------------------------
    def stats(self) -> Dict[str, Any]:
        """A snapshot of the engine's metrics (per-op time, worker busy/idle,
        ring depth and bytes, consumer wait, errors by reason; with a device,
        the copies and pinned buffers). An op's entry has "python": True
        when it runs in Python, with "gil_wait_s" (waiting for the Python-op
        lock and the GIL) and "gil_held_s" (running holding the GIL); with
        python_workers=N it has "processes" (N), "proc_calls", "proc_wait_s"
        (waiting for a free worker), "proc_call_s" (round trips, copies
        included) and "proc_run_s" (the workers' time in the Python
        members) instead, and stats()["python_workers"] their pids."""
        m = self._loader.metrics()
        pool = getattr(self, "_python_pool", None)
        if pool is not None:
            m["python_workers"] = {"processes": len(pool.processes), "start_method": pool.start_method,
                                   "pids": pool.pids}
        if self._feeder is not None:
            m["device"] = self._feeder.stats()
        if str(getattr(self, "source", "")).startswith("s3://"):
            # The process's counters (every s3:// loader's): the doctor takes deltas.
            m["object_store"] = _C.object_store_stats()
        return m

    def close(self) -> None:
        """Stops and joins the worker threads. Tensors already handed out
        stay valid."""
        if getattr(self, "_batch_map_thread", None) is not None:
            self._stop_batch_map()
        if self._feeder is not None:
            # Copies finish and buffers are unpinned while the ring is alive.
            self._feeder.close()
        pool = getattr(self, "_python_pool", None)
        if pool is not None:
            pool.cancel()  # wakes threads waiting on a worker
        if not self._loader.closed:
            self._loader.close()
        if pool is not None:
            pool.close()  # reaps the workers, closes the shared memory

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        # docs/reliability.md 37: a loader owns native threads and buffers; a copy
        # in another process could not run them.
        raise TypeError(f"a feedline.{type(self).__name__} cannot be pickled: it owns native worker threads and "
                        "batch buffers. Pass its arguments instead and create the loader where it is used "
                        "(one per process)")

    def __enter__(self: _LoaderT) -> _LoaderT:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        loader = getattr(self, "_loader", None)
        if loader is not None and not loader.closed:
            self.close()


def _native_transform(transform: Any, strict: bool) -> Tuple[Any, Optional[_transforms.Translation]]:
    """(native ImageTransform, its torchvision translation or None)."""
    if transform is None:
        return _transforms.imagenet_train(), None
    if isinstance(transform, _C.ImageTransform):
        return transform, None
    if callable(transform):
        translation = _transforms.translate(transform, strict)
        return translation.transform, translation
    raise TypeError("transform must be a feedline.transforms transform or a torchvision transform "
                    f"(Compose or member), got {type(transform).__name__}")


def _python_workers(n: int, recipe: _C.PyRecipe, map: Any, pipeline: Any, field_chains: bool = False) -> int:
    """python_workers= checked against the recipe: refused where nothing
    would run in the workers, never ignored."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"python_workers must be an int >= 0, got {n!r}")
    if n == 0:
        return 0
    if field_chains:
        raise ValueError(f"python_workers={n} with fields=: the Python members of an image field's transform run "
                         "on the loader's threads (GIL held only while they run); process workers for fields= are "
                         "not supported yet (use python_workers=0)")
    if map is not None:
        raise ValueError("python_workers runs a Compose's Python members in processes; map= runs on the worker "
                         "threads and is not supported with python_workers yet (drop one of them)")
    if pipeline is not None or recipe.chain is None:
        raise ValueError(f"python_workers={n}, but this transform has no Python members: nothing would run in the "
                         "worker processes (use python_workers=0)")
    return n


class RecordLoader(Loader):
    """Raw records instead of decoded images, for non-image data or decoding
    elsewhere: iterating yields (data, lengths, labels) where data is a uint8
    tensor [batch, max_record_bytes] (zero padded) and lengths gives each
    record's size. A record over max_record_bytes fails naming its size (or
    is skipped and counted under max_errors). Every other argument is
    Loader's.
    """

    def __init__(self, source: Source, batch_size: int = 256, max_record_bytes: int = 1 << 20, **kwargs: Any) -> None:
        if max_record_bytes <= 0:
            raise ValueError(f"max_record_bytes must be positive, got {max_record_bytes}")
        kwargs.pop("transform", None)
        super().__init__(source, batch_size=batch_size, _raw_max_bytes=max_record_bytes, **kwargs)
        self.max_record_bytes = max_record_bytes

    # Yields triples where Loader yields pairs: not a drop-in Loader for iteration.
    def __iter__(self) -> Iterator[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        for batch in self.batches():
            triple = batch.fields["bytes"], batch.fields["length"], batch.fields["label"]
            del batch
            yield triple
            del triple
