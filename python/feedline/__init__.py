"""feedline: keeps accelerators fed.

A C++ input pipeline with a PyTorch face: worker threads (not processes)
read, decode only what the crop needs, augment and batch images straight into
recycled buffers that arrive as torch tensors without a copy. Output is
identical for any thread count and resumable mid-epoch.

    import feedline
    loader = feedline.Loader("/data/imagenet/train", batch_size=256,
                             transform=feedline.transforms.imagenet_train(224),
                             shuffle=True, seed=0, drop_last=True)
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for images, labels in loader:
            ...

feedline.doctor measures any training loop (this loader, a torch DataLoader,
any iterable) and says how starved it is, why, and what to change.
"""
import typing as _typing

from . import _C as _C  # the binding module: feedline._C
from . import _pickle as _pickle  # the native transforms pickle (Ray, multiprocessing)
from . import transforms
from ._C import (
    CancelledError,
    Error,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    ResourceError,
    TimeoutError,
    load_ops,
    registered_ops,
)
from ._tv import UnsupportedTransformError
from .loader import Batch, Loader, RecordLoader
from .tokens import TokenLoader

if _typing.TYPE_CHECKING:  # for type checkers; at run time the import waits for first use (__getattr__)
    from . import doctor as doctor
    from .pack_text import pack_text as pack_text

__all__ = ["Loader", "RecordLoader", "TokenLoader", "pack_text", "Batch", "transforms", "doctor", "Error",
           "ResourceError", "CancelledError", "InvalidArgumentError", "OutOfRangeError", "NotFoundError",
           "TimeoutError", "UnsupportedTransformError", "load_ops", "registered_ops"]


def __getattr__(name: str) -> "_typing.Any":
    # feedline.doctor is imported on first use: importing feedline stays as
    # light as it was, and the loader works where the doctor is not installed.
    if name == "doctor":
        import importlib
        return importlib.import_module(".doctor", __name__)
    # feedline.pack_text likewise (its module is callable: feedline.pack_text(...) packs),
    # so that `python -m feedline.pack_text` finds it not yet imported.
    if name == "pack_text":
        import importlib
        return importlib.import_module(".pack_text", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> "_typing.List[str]":
    return sorted(set(globals()) | {"doctor", "pack_text"})
