"""Image transforms with torchvision's semantics, run in C++ inside the loader.

Each function returns a transform description; the loader applies it to every
sample in one fused pass: decode (only the crop, at reduced JPEG DCT scale
when the crop allows) -> crop -> antialiased resize (Pillow's filters) ->
horizontal flip -> colour and pixel ops on the 8-bit pixels (ColorJitter,
GaussianBlur, ...; with_pixel_ops) -> normalise -> convert to the output
dtype and layout -> RandomErasing on the output (with_random_erasing). The
pixel ops are also callable on one uint8 (3, H, W) tensor:
ColorJitter(brightness=(1.3, 1.3))(img); RandomErasing on a float tensor.
RandomCrop(size, padding, pad_if_needed, fill, padding_mode) and Pad crop
and pad the decoded image without a resize (CIFAR's RandomCrop(32, 4)), also
callable on one image; RandomVerticalFlip is a pixel op. RandomResizedCrop,
Resize, CenterCrop and RandomHorizontalFlip are callable on one image too
(the loader's resample) and may sit in a torchvision Compose.

MixUp, CutMix and RandomChoice([MixUp, CutMix]) act on collated batches:
Loader(batch_transform=...) or called on (images, labels).

from_torchvision(compose) translates a torchvision Compose (v1 or v2) into
the same kind of description (docs/python.md, "torchvision transforms").
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

from . import _C
from ._batch import IMAGE_DTYPES, CutMix, MixUp, RandomChoice, RandomErasing
from ._geometry import CenterCrop, Pad, RandomCrop, RandomHorizontalFlip, RandomResizedCrop, Resize
from ._pixel import (
    AugMix,
    AutoAugment,
    ColorJitter,
    GaussianBlur,
    Grayscale,
    PixelTransform,
    RandAugment,
    RandomAdjustSharpness,
    RandomAffine,
    RandomAutocontrast,
    RandomEqualize,
    RandomGrayscale,
    RandomInvert,
    RandomPosterize,
    RandomRotation,
    RandomSolarize,
    RandomVerticalFlip,
    TrivialAugmentWide,
)
from ._tv import Translation, UnsupportedMember, UnsupportedTransformError, from_torchvision, translate

__all__ = ["random_resized_crop", "resize_center_crop", "imagenet_train", "imagenet_eval", "from_torchvision",
           "translate", "Translation", "UnsupportedMember", "UnsupportedTransformError", "IMAGENET_MEAN",
           "IMAGENET_STD", "PixelTransform", "ColorJitter", "Grayscale", "RandomGrayscale", "RandomInvert",
           "RandomPosterize", "RandomSolarize", "RandomAutocontrast", "RandomEqualize", "RandomAdjustSharpness",
           "GaussianBlur", "with_pixel_ops", "RandomErasing", "with_random_erasing", "MixUp", "CutMix",
           "RandomChoice", "RandomRotation", "RandomAffine", "TrivialAugmentWide", "RandAugment",
           "AutoAugment", "AugMix", "RandomCrop", "Pad", "RandomVerticalFlip", "RandomResizedCrop", "Resize",
           "CenterCrop", "RandomHorizontalFlip"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

_DTYPES = IMAGE_DTYPES
_INTERPOLATION = {"bilinear": _C.Interpolation.BILINEAR, "bicubic": _C.Interpolation.BICUBIC}


def _finish(t: _C.ImageTransform, dtype: torch.dtype, channels_last: bool, interpolation: str, normalize: bool,
            mean: Sequence[float], std: Sequence[float], exact: bool) -> _C.ImageTransform:
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {list(_DTYPES)}, got {dtype}")
    if interpolation not in _INTERPOLATION:
        raise ValueError(f"interpolation must be 'bilinear' or 'bicubic', got {interpolation!r}")
    t.dtype = _DTYPES[dtype]
    t.layout = _C.Layout.HWC if channels_last else _C.Layout.CHW
    t.interpolation = _INTERPOLATION[interpolation]
    t.normalize = normalize
    t.mean, t.std = list(mean), list(std)
    t.dct_scaling = not exact
    return t


def random_resized_crop(size: int = 224, scale: Sequence[float] = (0.08, 1.0), ratio: Sequence[float] = (3 / 4, 4 / 3),
                        hflip_prob: float = 0.5, *, dtype: torch.dtype = torch.float32, channels_last: bool = False,
                        interpolation: str = "bilinear", normalize: bool = True,
                        mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD,
                        exact: bool = False) -> _C.ImageTransform:
    """RandomResizedCrop(size, scale, ratio) + RandomHorizontalFlip(hflip_prob)
    + ToTensor + Normalize(mean, std) (when normalize; uint8 output is never
    normalised). exact=True decodes at full size (bit-faithful to PIL)."""
    t = _C.imagenet_train(size)
    t.scale, t.ratio, t.hflip_prob = list(scale), list(ratio), hflip_prob
    return _finish(t, dtype, channels_last, interpolation, normalize, mean, std, exact)


def resize_center_crop(resize: int = 256, size: int = 224, *, dtype: torch.dtype = torch.float32,
                       channels_last: bool = False, interpolation: str = "bilinear", normalize: bool = True,
                       mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD,
                       exact: bool = False) -> _C.ImageTransform:
    """Resize(resize) (shorter side) + CenterCrop(size) + ToTensor + Normalize."""
    t = _C.imagenet_eval(resize, size)
    return _finish(t, dtype, channels_last, interpolation, normalize, mean, std, exact)


def imagenet_train(size: int = 224, **kwargs: Any) -> _C.ImageTransform:
    """The standard ImageNet training recipe: random_resized_crop(size)."""
    return random_resized_crop(size, **kwargs)


def imagenet_eval(size: int = 224, resize: int = 256, **kwargs: Any) -> _C.ImageTransform:
    """The standard ImageNet evaluation recipe: resize_center_crop(resize, size)."""
    return resize_center_crop(resize, size, **kwargs)


def with_pixel_ops(t: _C.ImageTransform, *ops: PixelTransform) -> _C.ImageTransform:
    """`t` with colour and pixel ops (ColorJitter, GaussianBlur, ...) run,
    in order, on its 8-bit pixels after the resize and flip, before
    normalisation (docs/augmentations.md)."""
    for op in ops:
        if not isinstance(op, PixelTransform):
            raise TypeError(f"with_pixel_ops takes feedline.transforms pixel ops, got {type(op).__name__}")
    t.pixel_ops = list(t.pixel_ops) + [op.op() for op in ops]
    _C.check_pixel_ops(t.pixel_ops)
    return t


def with_random_erasing(t: _C.ImageTransform, *ops: RandomErasing) -> _C.ImageTransform:
    """`t` with RandomErasing ops run, in order, on its output (after
    normalisation and the dtype conversion), each sample drawing its own
    rectangle (docs/augmentations.md)."""
    for op in ops:
        if not isinstance(op, RandomErasing):
            raise TypeError(f"with_random_erasing takes feedline.transforms.RandomErasing, got {type(op).__name__}")
    t.erase_ops = list(t.erase_ops) + [op.op() for op in ops]
    _C.check_erase_ops(t.erase_ops, t.dtype)
    return t
