"""Python ops (docs/python_ops.md): what runs in Python on feedline's worker
threads, called by the C++ ops of python/bindings/python_op.cc while they
hold the Python-op lock and the GIL.

- the middle of a torchvision Compose split into native prefix, Python
  middle and native suffix (`chain_runner`),
- `map=` on a sample dict (`MapRunner`),
- `batch_map=` on collated batches, on a background thread (`BatchMapThread`).

Each per-sample call runs with torch's default CPU generator, `random` and
numpy's global generator seeded from the sample's own stream, and puts
them back afterwards (`seeded`): same seed, same bytes, at any thread count.
"""
from __future__ import annotations

import contextlib
import io
import json
import queue
import random
import threading
from typing import Any, Callable, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

_SEED_MASK = (1 << 63) - 1


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """torch's default CPU generator, `random` and numpy's global generator
    seeded from `seed` for the block, then restored as they were (CUDA
    generators are not touched)."""
    g = torch.default_generator
    saved = g.get_state(), random.getstate(), np.random.get_state()
    g.manual_seed(seed & _SEED_MASK)
    random.seed(seed)
    np.random.seed(seed & 0xFFFFFFFF)
    try:
        yield
    finally:
        g.set_state(saved[0])
        random.setstate(saved[1])
        np.random.set_state(saved[2])


def _tensor_out(x: Any, what: str) -> Tuple[np.ndarray, str]:
    """A tensor or ndarray as (contiguous numpy array, dtype name)."""
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy(), "bfloat16"  # numpy has no bfloat16
        return t.numpy(), str(t.dtype).replace("torch.", "")
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x), x.dtype.name
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{what} is a bool: give an int or a tensor")
    if isinstance(x, (int, np.integer)):
        return np.array(int(x), dtype=np.int64), "int64"
    if isinstance(x, (float, np.floating)):
        return np.array(float(x), dtype=np.float64), "float64"
    raise TypeError(f"{what} is a {type(x).__name__}: expected a tensor, an ndarray or a number")


def _chain_out(x: Any) -> Tuple[np.ndarray, bool, str]:
    from PIL import Image
    if isinstance(x, Image.Image):
        if x.mode not in ("RGB", "L", "RGBA"):
            raise TypeError(f"the Python members returned a PIL image of mode {x.mode!r}: the native "
                            "ToTensor/PILToTensor after them take RGB, RGBA or L images")
        return np.array(x), True, "uint8"
    a, dtype = _tensor_out(x, "what the Python members returned")
    return a, False, dtype


class ChainRunner:
    """The Python middle of a split Compose: members (position, repr,
    callable) applied in order to a PIL image made from the prefix's pixels
    (uint8 HWC), under `seeded(seed)`. Calling it returns (array, is_pil,
    dtype name). A class, not a closure, so that python_workers= can pickle
    it to "spawn"/"forkserver" workers (its members must pickle too)."""

    def __init__(self, members: Sequence[Tuple[str, str, Callable[[Any], Any]]]) -> None:
        self.members = list(members)

    def __call__(self, pixels: np.ndarray, seed: int) -> Tuple[np.ndarray, bool, str]:
        from PIL import Image
        x: Any = Image.fromarray(np.array(pixels))  # RGB (h, w, 3 uint8); a copy: the pixels are the worker's
        with seeded(seed):
            for pos, text, fn in self.members:
                try:
                    x = fn(x)
                except Exception as e:
                    if hasattr(e, "add_note"):
                        e.add_note(f"in transform member {text} at position {pos}")
                    raise
        return _chain_out(x)


def chain_runner(members: Sequence[Tuple[str, str, Callable[[Any], Any]]]) -> ChainRunner:
    """The Python middle of a split Compose (ChainRunner)."""
    return ChainRunner(members)


def _sample_value(kind: str, value: Any) -> Any:
    if kind in ("image", "tensor"):
        a, dtype = value
        t = torch.from_numpy(a)
        return t.view(torch.bfloat16) if dtype == "bfloat16" else t
    if kind == "label":
        return int(value[0])
    if kind == "text":
        return value.decode("utf-8")
    if kind == "json":
        return json.loads(value)
    if kind == "ndarray":
        return np.lib.format.read_array(io.BytesIO(value), allow_pickle=False)
    return value  # bytes


def _field_value(kind: str, name: str, x: Any) -> Tuple[Any, str]:
    what = f"map's value for {name!r}"
    if kind in ("image", "tensor", "label"):
        return _tensor_out(x, what)
    if kind == "text":
        if not isinstance(x, str):
            raise TypeError(f"{what} is a {type(x).__name__}: a text field needs a str")
        return x.encode("utf-8"), "bytes"
    if kind == "json":
        return json.dumps(x).encode("utf-8"), "bytes"
    if kind == "ndarray":
        buf = io.BytesIO()
        np.save(buf, np.asarray(x), allow_pickle=False)
        return buf.getvalue(), "bytes"
    if not isinstance(x, (bytes, bytearray, memoryview)):
        raise TypeError(f"{what} is a {type(x).__name__}: a bytes field needs bytes")
    return bytes(x), "bytes"


def _fits(kind: str, x: Any) -> bool:
    """Whether `x` can stay a field of `kind` (a map that keeps a key keeps
    its kind when the value still fits it)."""
    if kind in ("image", "tensor", "label"):
        return isinstance(x, (torch.Tensor, np.ndarray, int, float, np.integer, np.floating)) and \
            not isinstance(x, (bool, np.bool_))
    if kind == "text":
        return isinstance(x, str)
    if kind == "ndarray":
        return isinstance(x, (np.ndarray, torch.Tensor))
    if kind == "bytes":
        return isinstance(x, (bytes, bytearray, memoryview))
    return kind == "json"


def _kind_of(x: Any) -> str:
    """The field kind of a value a map added (or changed past its kind): ints
    and floats are scalars collated into tensors, as torch's default_collate
    does; tensors and arrays are fixed-shape tensors; str text (lists of str);
    bytes bytes; anything else JSON (lists of values)."""
    if isinstance(x, (bool, np.bool_)):
        return "json"
    if isinstance(x, (int, np.integer)):
        return "label"
    if isinstance(x, (float, np.floating, torch.Tensor, np.ndarray)):
        return "tensor"
    if isinstance(x, str):
        return "text"
    if isinstance(x, (bytes, bytearray, memoryview)):
        return "bytes"
    return "json"


class MapRunner:
    """map=: fn on the sample dict {name: value} (tensors, ints, str, parsed
    JSON, ndarrays, bytes by kind), under `seeded(seed)`; returns one (name,
    value, dtype name) per output field.

    fn may add, drop or change fields. The first sample that succeeds (the
    probe the engine runs at creation) fixes the output: its keys in order
    (the sample's own keys first, in their order, then the new ones as fn
    returned them) and each one's kind (`out_names`, `out_kinds`); a key the
    sample had keeps its kind while its value fits it. Every later sample
    must return the same keys, values of the same kinds and, for tensors,
    the same shape and dtype (checked by the engine)."""

    def __init__(self, fn: Callable[[dict], Any], names: Sequence[str], kinds: Sequence[str],
                 fixed: Optional[Sequence[str]] = None) -> None:
        self.fn, self.names, self.kinds = fn, list(names), list(kinds)
        self.fixed = None if fixed is None else list(fixed)  # a loader whose output keys cannot change
        self.out_names: Optional[List[str]] = None
        self.out_kinds: Optional[List[str]] = None

    def _learn(self, out: Mapping[Any, Any]) -> Tuple[List[str], List[str]]:
        bad = [k for k in out if not isinstance(k, str)]
        if bad:
            raise TypeError(f"map returned the key {bad[0]!r}: field names are str")
        if self.fixed is not None and set(out) != set(self.fixed):
            raise ValueError(f"map returned the keys {sorted(out)}; on this loader it must return "
                             f"{sorted(self.fixed)} (to add or drop fields, use fields=)")
        if not out:
            raise ValueError("map returned an empty dict: a sample needs at least one field")
        own = dict(zip(self.names, self.kinds))
        names = [n for n in self.names if n in out] + [n for n in out if n not in own]
        kinds = [own[n] if n in own and _fits(own[n], out[n]) else _kind_of(out[n]) for n in names]
        return names, kinds

    def __call__(self, values: List[Any], seed: int) -> List[Tuple[str, Any, str]]:
        sample = {n: _sample_value(k, v) for n, k, v in zip(self.names, self.kinds, values)}
        with seeded(seed):
            out = self.fn(sample)
        if not isinstance(out, Mapping):
            raise TypeError(f"map returned a {type(out).__name__}: it must return the sample dict")
        if self.out_names is None:
            names, kinds = self._learn(out)
        else:
            names, kinds = self.out_names, self.out_kinds or []
            if len(out) != len(names) or any(n not in out for n in names):
                extra = sorted(str(k) for k in out if k not in names)
                missing = [n for n in names if n not in out]
                raise ValueError(f"map returned the keys {sorted(map(str, out))}, the first sample's were {names} "
                                 f"(missing {missing}, new {extra}): every sample must return the same fields")
        result = [(n, *_field_value(k, n, out[n])) for n, k in zip(names, kinds)]
        if self.out_names is None:  # learned only once a whole sample converted
            self.out_names, self.out_kinds = names, kinds
        return result


class BatchMapThread:
    """batch_map=: a background thread that takes each batch from `source`
    (an iterator of (batch, engine state after it)), applies fn, and hands
    it to the loop through a queue of one, so that the loader's ring keeps
    its backpressure: the thread waits while the loop holds its batch."""

    _END = object()

    def __init__(self, source: Iterator[Tuple[Any, bytes]], fn: Callable[[Any], Any]) -> None:
        self._source, self._fn = source, fn
        self._queue: "queue.Queue[Any]" = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="feedline-batch-map", daemon=True)
        self._thread.start()

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for batch, state in self._source:
                out = self._fn(batch)
                del batch
                if not self._put(("batch", out, state)):
                    return
                del out
            self._put(("end", None, None))
        except BaseException as e:  # handed to the loop, raised there
            self._put(("error", e, None))

    def get(self) -> Tuple[str, Any, Optional[bytes]]:
        while True:
            try:
                return self._queue.get(timeout=0.1)
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    return ("end", None, None)

    def close(self) -> None:
        self._stop.set()
        while True:  # unblock a put, then let the thread see the flag
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join()
        close = getattr(self._source, "close", None)
        if close is not None:
            close()
