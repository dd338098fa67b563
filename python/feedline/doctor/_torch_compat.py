"""Every place the doctor reaches past torch's public DataLoader API, in one module.

The probes (probes.py) time the user's dataset, transforms, collate_fn and
worker_init_fn wherever they run, and ride back inside the batch. Installing
them needs a few things torch does not promise, and each is here, checked when
the doctor attaches:

  dataset      a torch Dataset's instance gets, for the time of the watch, a
               subclass of its own class (probes.timed_class) that times
               __getitem__ / __getitems__ / __iter__: every isinstance check
               torch makes (IterableDataset, IterDataPipe for seeds and
               sharding, torchdata's Stateful) answers as without the doctor,
               and loader.dataset stays the very same object. Anything else
               (a list, a tensor) is replaced on the loader by a forwarding
               wrapper, past DataLoader's guard on `dataset`.
  transforms   the entries of a torchvision-style Compose (a list in
               `.transforms`), replaced in place and put back.
  collate_fn,  plain attributes the iterator reads when it is created.
  worker_init_fn
  pin memory   torch's nested pin function (torch.utils.data._utils.pin_memory),
               which hands an object it does not know to its pin_memory():
               ProbedBatch pins its batch with it.
  workers      loader._iterator, the persistent workers' iterator, and its
               _shutdown_workers().

When a required one fails (or the torch version is not one the probes know),
nothing is installed and the loop is timed from the outside only (the wait
for each batch, the step); a failed optional one (transforms, worker start-up)
only loses its timings. Either way the reason, in a sentence, goes into the
report's "probes" section and a finding (rules._probes_not_attached).
"""
from __future__ import annotations

import copyreg
import inspect
from typing import Any, Callable, Iterator, Optional

from . import probes

# The torch versions the probes were checked against (tests/python/test_doctor_torch2.py
# runs under Debian's 1.13 and pip's 2.14); a newer major version is unknown ground.
OLDEST = (1, 13)
TESTED = "1.13 and 2.14"
NEXT_MAJOR = 3


class Unsupported(Exception):
    """An assumption about torch that does not hold; `part` is what cannot
    be attached, str() the reason."""

    def __init__(self, part: str, reason: str) -> None:
        super().__init__(reason)
        self.part = part


def torch_version() -> Optional[tuple[int, int]]:
    """(major, minor) of the torch in use, or None when it cannot be read."""
    import torch
    try:
        major, minor = torch.__version__.split("+")[0].split(".")[:2]
        return int(major), int(minor)
    except (ValueError, AttributeError):
        return None


def check_version() -> None:
    import torch
    v = torch_version()
    if v is None or v < OLDEST or v[0] >= NEXT_MAJOR:
        raise Unsupported("torch", f"torch {torch.__version__} is not a version the probes know "
                                   f"({OLDEST[0]}.{OLDEST[1]} to {NEXT_MAJOR - 1}.x; tested with {TESTED})")


# -- the dataset -------------------------------------------------------------------------------
def _is_torch_dataset(ds: Any) -> bool:
    from torch.utils.data import Dataset
    return isinstance(ds, Dataset)


class _ClassSwap:
    """The user's dataset, its class swapped for probes.timed_class(its class)."""

    how = "subclass"

    def __init__(self, ds: Any) -> None:
        self.ds, self.base = ds, type(ds)
        timed = probes.timed_class(self.base)
        try:
            object.__setattr__(ds, "__class__", timed)
        except TypeError as e:  # a layout that Python will not swap (a C type, say)
            raise Unsupported("dataset", f"a {self.base.__name__} cannot take the probes' subclass: {e}") from e
        if type(ds) is not timed or not isinstance(ds, self.base):
            self.detach()
            raise Unsupported("dataset", f"a {self.base.__name__} does not keep the class it is given")

    def detach(self) -> None:
        if type(self.ds) is not self.base:
            object.__setattr__(self.ds, "__class__", self.base)


class _Replaced:
    """A dataset that is not a torch Dataset (a list, a tensor, a Hugging Face
    dataset): torch only indexes it, takes its len() and asks for
    __getitems__, so a forwarding wrapper (probes.TimedContainer) stands in
    for it on the loader."""

    how = "wrapper"

    def __init__(self, loader: Any, ds: Any) -> None:
        self.loader, self.ds = loader, ds
        if not callable(getattr(type(ds), "__getitem__", None)):
            raise Unsupported("dataset", f"a {type(ds).__name__} is neither a torch Dataset nor indexable")
        if "dataset" not in vars(loader):
            raise Unsupported("dataset", f"{type(loader).__name__} keeps its dataset somewhere other than "
                                         "its `dataset` attribute")
        wrapper = probes.TimedContainer(ds)
        object.__setattr__(loader, "dataset", wrapper)  # past DataLoader's guard on `dataset`
        if loader.dataset is not wrapper:
            self.detach()
            raise Unsupported("dataset", f"{type(loader).__name__}.dataset cannot be replaced")

    def detach(self) -> None:
        if self.loader.dataset is not self.ds:
            object.__setattr__(self.loader, "dataset", self.ds)


def time_dataset(loader: Any) -> _ClassSwap | _Replaced:
    """Times the loader's dataset; returns the handle whose detach() undoes it."""
    ds = loader.dataset
    if probes.is_timed(ds):
        raise Unsupported("dataset", f"this {user_type(ds).__name__} is already timed by another Doctor")
    return _ClassSwap(ds) if _is_torch_dataset(ds) else _Replaced(loader, ds)


def user_dataset(loader: Any) -> Any:
    """The user's dataset behind loader.dataset (through a TimedContainer)."""
    ds = loader.dataset
    return ds.dataset if isinstance(ds, probes.TimedContainer) else ds


def user_type(ds: Any) -> type:
    """The user's class of a dataset, timed or not."""
    return type(ds).__dict__.get("_feedline_base") or type(ds)


def reduce_timed(obj: Any, protocol: int) -> Any:
    """__reduce_ex__ of a timed dataset (spawned workers, copy.deepcopy):
    reduce it as its own class would and re-time it where it is rebuilt.
    The timed class itself cannot be pickled by name."""
    base: Any = user_type(obj)
    rv = base.__reduce_ex__(obj, protocol)
    if isinstance(rv, str):  # a module-level object pickled by name: it stays itself, untimed
        return rv
    fn, args = rv[0], tuple(rv[1])
    if fn is type(obj):  # a __reduce__ that returns (self.__class__, args)
        fn = base
    elif fn in _RECONSTRUCTORS and args \
            and args[0] is type(obj):
        args = (base,) + args[1:]
    return (_rebuild_timed, (fn, args)) + tuple(rv[2:])


# How copyreg rebuilds an object of a given class (not in typeshed's copyreg).
_RECONSTRUCTORS = tuple(getattr(copyreg, n) for n in ("__newobj__", "__newobj_ex__", "_reconstructor"))


def _rebuild_timed(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    obj = fn(*args)
    try:
        object.__setattr__(obj, "__class__", probes.timed_class(type(obj)))
    except TypeError:
        pass  # untimed but intact: the batches stay the same
    return obj


# -- transforms --------------------------------------------------------------------------------
def dataset_chain(dataset: Any, depth: int = 4) -> Iterator[Any]:
    """The dataset and those it wraps, through Subset-like wrappers (each
    one's `.dataset`), at most `depth` of them: where the doctor looks for
    a Compose, the file list and the images."""
    for _ in range(depth):
        if dataset is None:
            return
        yield dataset
        dataset = getattr(dataset, "dataset", None)


def find_compose(dataset: Any) -> Any:
    """The torchvision-style Compose behind dataset.transform (through
    Subset-like wrappers), or None."""
    for ds in dataset_chain(dataset):
        tf = getattr(ds, "transform", None)
        if tf is not None and hasattr(tf, "transforms") and callable(tf):
            return tf
    return None


def time_transforms(compose: Any) -> list[Any]:
    """Replaces each entry of compose.transforms (in place: the Compose is
    the user's, shared by every copy of the dataset) by a TimedTransform;
    returns the entries to put back."""
    tfs = getattr(compose, "transforms", None)
    if not isinstance(tfs, list):
        raise Unsupported("transforms", f"{type(compose).__name__}.transforms is a {type(tfs).__name__}, "
                                        "not the list the probes edit in place")
    if not all(callable(t) for t in tfs):
        raise Unsupported("transforms", f"{type(compose).__name__}.transforms holds an entry that is not callable")
    saved = list(tfs)
    tfs[:] = [probes.TimedTransform(t, i) for i, t in enumerate(saved)]
    return saved


def restore_transforms(compose: Any, saved: list[Any]) -> None:
    compose.transforms[:] = saved


# -- collate_fn, worker_init_fn ------------------------------------------------------------------
def replace_attribute(loader: Any, name: str, value: Any) -> Any:
    """Sets loader.<name> (an attribute the iterator reads when it is
    created); returns the old value."""
    if not hasattr(loader, name):
        raise Unsupported(name, f"{type(loader).__name__} has no `{name}`")
    old = getattr(loader, name)
    setattr(loader, name, value)
    if getattr(loader, name) is not value:
        setattr(loader, name, old)
        raise Unsupported(name, f"{type(loader).__name__}.{name} does not keep what it is set to")
    return old


def is_default_collate(fn: Any) -> bool:
    from torch.utils.data import default_collate
    return fn is default_collate


# -- pin memory ----------------------------------------------------------------------------------
_pin: Optional[Callable[..., Any]] = None


def pin_function() -> Callable[..., Any]:
    """torch's pin function for nested batches (what the pin-memory thread
    runs on each batch), after checking that it hands an object it does not
    know to that object's pin_memory(): how a ProbedBatch pins the batch it
    carries and times it. Runs on a batch without tensors, so no device is
    needed."""
    global _pin
    if _pin is not None:
        return _pin
    try:
        from torch.utils.data._utils import pin_memory as pin_module
        fn = pin_module.pin_memory
    except (ImportError, AttributeError) as e:
        raise Unsupported("pin_memory", f"torch.utils.data._utils.pin_memory.pin_memory is gone ({e})") from e
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    if not params or params[0] != "data":
        raise Unsupported("pin_memory", "torch.utils.data._utils.pin_memory.pin_memory(data, ...) has changed "
                                        f"its signature ({params})")
    _pin = fn  # set first: the check below pins through ProbedBatch.pin_memory, which asks for it
    try:
        out = fn(probes.ProbedBatch("probe", {}))
        ok = isinstance(out, probes.ProbedBatch) and out.data == "probe" and "pin" in out.info
    except Exception as e:  # noqa: BLE001 - any failure means the assumption is wrong
        ok, why = False, f"{type(e).__name__}: {e}"
    else:
        why = f"it returned a {type(out).__name__}"
    if not ok:
        _pin = None
        raise Unsupported("pin_memory", "torch's pin function does not hand a batch it does not know to the "
                                        f"batch's own pin_memory() ({why})")
    return _pin


# -- the workers -----------------------------------------------------------------------------------
def live_iterator(loader: Any) -> Any:
    """The iterator that keeps persistent workers alive between epochs, or None."""
    if not hasattr(loader, "_iterator"):
        raise Unsupported("persistent workers", f"{type(loader).__name__} has no `_iterator`: the doctor cannot "
                                                "tell whether persistent workers are running")
    return loader._iterator


def has_persistent_workers(loader: Any) -> bool:
    return bool(loader.num_workers > 0 and loader.persistent_workers)


def shutdown_workers(loader: Any) -> Optional[str]:
    """Stops the persistent workers (started with the probes), so that the
    next epoch starts new ones with the user's own objects. Returns a note
    when it had to leave that to the iterator's destructor."""
    it = getattr(loader, "_iterator", None)
    if it is None:
        return None
    note = None
    shutdown = getattr(it, "_shutdown_workers", None)
    if callable(shutdown):
        shutdown()
    else:
        note = (f"{type(it).__name__} has no _shutdown_workers(): its workers stop when the iterator is "
                "collected")
    loader._iterator = None
    del it
    return note


def start_method(loader: Any) -> Optional[str]:
    """The multiprocessing start method the loader was given, or None (the default)."""
    ctx = loader.multiprocessing_context
    if ctx is None:
        return None
    get = getattr(ctx, "get_start_method", None)
    try:
        return get() if callable(get) else str(ctx)
    except Exception:  # noqa: BLE001 - a custom context object: describe it
        return str(ctx)


# -- attaching everything ----------------------------------------------------------------------------
class Attachment:
    """What the probes changed on one loader, and what they could not attach.

    attach() either installs every required probe (dataset, collate_fn; the
    pin function when the loader pins) or none; `outside` is then the
    reason, as a list of {"part", "reason"}. Optional probes that fail are in
    `notes` and leave the rest working. detach() undoes all, idempotently."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.outside: list[dict[str, str]] = []   # required probes that failed: timed from outside
        self.notes: list[dict[str, str]] = []     # optional probes that failed
        self.attached: list[str] = []             # names of the parts attached
        self.dataset: Any = None   # the user's dataset
        self.collate_fn: Any = None
        self.worker_init_fn: Any = None
        self.compose: Any = None
        self.transforms: Optional[list[Any]] = None  # the Compose's own entries, while replaced
        self._undo: list[Callable[[], Any]] = []
        self.active = False

    def attach(self) -> bool:
        loader = self.loader
        self.dataset = user_dataset(loader)
        self.collate_fn, self.worker_init_fn = loader.collate_fn, loader.worker_init_fn
        try:
            check_version()
            if has_persistent_workers(loader) and live_iterator(loader) is not None:
                raise Unsupported("persistent workers", "persistent workers were already running without the "
                                  "probes, and restarting them would reseed their random number generators")
            if loader.pin_memory:
                pin_function()
            handle = time_dataset(loader)
            self._undo.append(handle.detach)
            self.attached.append(f"dataset ({handle.how})")
            old = replace_attribute(loader, "collate_fn",
                                    probes.TimedCollate(loader.collate_fn, is_default_collate(loader.collate_fn)))
            self._undo.append(lambda: setattr(loader, "collate_fn", old))
            self.attached.append("collate_fn")
        except Unsupported as e:
            self._run_undo()
            self.outside.append({"part": e.part, "reason": str(e)})
            return False
        self._optional()
        self.active = True
        return True

    def _optional(self) -> None:
        loader = self.loader
        try:
            old_init = replace_attribute(loader, "worker_init_fn", probes.TimedWorkerInit(loader.worker_init_fn))
            self._undo.append(lambda: setattr(loader, "worker_init_fn", old_init))
            self.attached.append("worker_init_fn")
        except Unsupported as e:
            self.notes.append({"part": e.part, "reason": str(e)})
        compose = find_compose(self.dataset)
        if compose is not None:
            try:
                saved = time_transforms(compose)
            except Unsupported as e:
                self.notes.append({"part": e.part, "reason": str(e)})
            else:
                self.compose, self.transforms = compose, saved
                self._undo.append(lambda: restore_transforms(compose, saved))
                self.attached.append("transforms")
        if loader.pin_memory:
            self.attached.append("pin_memory")

    def detach(self) -> None:
        """Puts everything back; with persistent workers started with the
        probes, stops them first (they run the probes' copies)."""
        if not self.active:
            return
        if has_persistent_workers(self.loader):
            note = shutdown_workers(self.loader)
            if note:
                self.notes.append({"part": "persistent workers", "reason": note})
        self._run_undo()
        self.transforms = None
        self.active = False

    def keeps_workers(self) -> bool:
        """Whether persistent workers started with the probes are alive."""
        return self.active and has_persistent_workers(self.loader) and getattr(self.loader, "_iterator",
                                                                                 None) is not None

    def _run_undo(self) -> None:
        while self._undo:
            self._undo.pop()()


# -- the step profiler (step_profile.py) ------------------------------------------------------------
# torch.profiler.profile(activities, record_shapes, with_stack) and
# prof.events() are public in 1.13 and 2.x; what differs is in the events:
# Debian's 1.13 is built without Kineto (the legacy profiler: CPU ops only,
# no input dtypes, the stack on each op), 2.x adds python_function and user
# annotation events (is_python_function, is_user_annotation), device events
# (device_type CUDA, linked to the op that launched them by
# linked_correlation_id == that op's id) and input_dtypes. And 2.x's
# with_stack alone records the Python calls as python_function events but
# leaves each op's own `stack` empty: Kineto fills it only under
# experimental_config=_ExperimentalConfig(verbose=True) (step_profile.from_events
# also falls back to the python_function events around an op without one).
def start_step_profiler(cuda: bool) -> Any:
    """A started torch.profiler.profile recording ops, their input shapes
    and Python stacks (and CUDA activity when `cuda`)."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    kwargs: dict[str, Any] = {}
    config = _verbose_config()
    if config is not None:
        kwargs["experimental_config"] = config
    prof = profile(activities=activities, record_shapes=True, with_stack=True, **kwargs)
    prof.__enter__()
    return prof


def _verbose_config() -> Any:
    """torch 2.x's _ExperimentalConfig(verbose=True), which puts the Python
    stack on each op's event; None under 1.13 (built without Kineto, its
    legacy profiler puts the stack there itself) or when torch lacks it."""
    v = torch_version()
    if v is None or v[0] < 2:
        return None
    try:
        from torch._C._profiler import _ExperimentalConfig
        return _ExperimentalConfig(verbose=True)
    except (ImportError, AttributeError, TypeError):
        return None


def stop_step_profiler(prof: Any) -> list[dict[str, Any]]:
    """Stops `prof`; its events as dicts of the fields step_profile.from_events reads."""
    prof.__exit__(None, None, None)
    out = []
    for e in prof.events():
        dev = getattr(e, "device_type", None)
        dev_name = str(getattr(dev, "name", dev) or "CPU").lower()
        dtypes = getattr(e, "input_dtypes", None) or ()
        out.append({
            "name": e.name, "tid": int(getattr(e, "thread", 0) or 0),
            "start_us": float(e.time_range.start), "end_us": float(e.time_range.end),
            "stack": list(getattr(e, "stack", None) or ()),
            "device": "cpu" if dev_name == "cpu" else dev_name,
            "python": bool(getattr(e, "is_python_function", False)),
            "id": getattr(e, "id", None) if dev_name == "cpu" else None,
            "linked_id": (getattr(e, "linked_correlation_id", None) or None) if dev_name != "cpu" else None,
            "dtypes": [str(d) for d in dtypes],
        })
    return out


def record_step(name: str) -> Any:
    """An entered record_function range named `name` (exit it with .__exit__)."""
    from torch.autograd.profiler import record_function
    rf = record_function(name)
    rf.__enter__()
    return rf


def tensor_cores() -> Optional[bool]:
    """The current CUDA device has tensor cores (compute capability 7.0 and up)."""
    try:
        import torch
        return torch.cuda.get_device_capability()[0] >= 7 if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001 - no device to ask: unknown
        return None


class SyncCallSites:
    """The exact lines of the calls that need a tensor's value on the host
    (Tensor.item, tolist, cpu, numpy, nonzero, __bool__, __repr__ and
    __format__: printing), for the profiled steps. torch.profiler's Python
    stacks name a function by its first line (Kineto's python_function
    events), and Debian's 1.13 on Python 3.11 misreads even that, so the
    doctor wraps these few methods of torch.Tensor while it profiles and
    reads the caller's frame itself; every other op runs untouched."""

    METHODS = {"item": "item", "tolist": "tolist", "cpu": "cpu", "numpy": "numpy", "nonzero": "nonzero",
               "__bool__": "bool", "__repr__": "print", "__format__": "print"}

    def __init__(self, is_library: Callable[[str], bool]) -> None:
        self.is_library = is_library
        self.calls: list[tuple[str, str, int, str]] = []   # (kind, file, line, function)
        self._saved: dict[str, Any] = {}
        self._depth = 0

    def install(self) -> None:
        import torch
        for name, kind in self.METHODS.items():
            orig = torch.Tensor.__dict__.get(name, getattr(torch.Tensor, name, None))
            if orig is None:
                continue
            self._saved[name] = torch.Tensor.__dict__.get(name, _INHERITED)
            setattr(torch.Tensor, name, self._wrap(orig, kind))

    def remove(self) -> None:
        import torch
        for name, orig in self._saved.items():
            if orig is _INHERITED:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, orig)
        self._saved.clear()

    def _wrap(self, orig: Any, kind: str) -> Callable[..., Any]:
        import sys
        import types
        sites = self

        def call(*args: Any, **kwargs: Any) -> Any:
            if sites._depth == 0:  # the outermost only: printing calls item() inside
                f: Optional[types.FrameType] = sys._getframe(1)
                while f is not None and sites.is_library(f.f_code.co_filename):
                    f = f.f_back
                if f is not None:
                    sites.calls.append((kind, f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
            sites._depth += 1
            try:
                return orig(*args, **kwargs)
            finally:
                sites._depth -= 1
        call.__name__ = getattr(orig, "__name__", kind)
        call.__doc__ = getattr(orig, "__doc__", None)
        return call


_INHERITED = object()  # a method torch.Tensor inherits (from _TensorBase) rather than defines
