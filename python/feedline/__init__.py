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
"""
from . import _C
from . import transforms
from ._C import CancelledError, Error, ResourceError
from .loader import Batch, Loader, RecordLoader

__all__ = ["Loader", "RecordLoader", "Batch", "transforms", "Error", "ResourceError", "CancelledError"]
