"""Image transforms with torchvision's semantics, run in C++ inside the loader.

Each function returns a transform description; the loader applies it to every
sample in one fused pass: decode (only the crop, at reduced JPEG DCT scale
when the crop allows) -> crop -> antialiased resize (Pillow's filters) ->
horizontal flip -> normalise -> convert to the output dtype and layout.
"""
import torch

from . import _C

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

_DTYPES = {torch.float32: _C.DType.float32, torch.float16: _C.DType.float16,
           torch.bfloat16: _C.DType.bfloat16, torch.uint8: _C.DType.uint8}
_INTERPOLATION = {"bilinear": _C.Interpolation.BILINEAR, "bicubic": _C.Interpolation.BICUBIC}


def _finish(t, dtype, channels_last, interpolation, normalize, mean, std, exact):
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


def random_resized_crop(size=224, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), hflip_prob=0.5, *,
                        dtype=torch.float32, channels_last=False, interpolation="bilinear",
                        normalize=True, mean=IMAGENET_MEAN, std=IMAGENET_STD, exact=False):
    """RandomResizedCrop(size, scale, ratio) + RandomHorizontalFlip(hflip_prob)
    + ToTensor + Normalize(mean, std) (when normalize; uint8 output is never
    normalised). exact=True decodes at full size (bit-faithful to PIL)."""
    t = _C.imagenet_train(size)
    t.scale, t.ratio, t.hflip_prob = list(scale), list(ratio), hflip_prob
    return _finish(t, dtype, channels_last, interpolation, normalize, mean, std, exact)


def resize_center_crop(resize=256, size=224, *, dtype=torch.float32, channels_last=False,
                       interpolation="bilinear", normalize=True, mean=IMAGENET_MEAN,
                       std=IMAGENET_STD, exact=False):
    """Resize(resize) (shorter side) + CenterCrop(size) + ToTensor + Normalize."""
    t = _C.imagenet_eval(resize, size)
    return _finish(t, dtype, channels_last, interpolation, normalize, mean, std, exact)


def imagenet_train(size=224, **kwargs):
    """The standard ImageNet training recipe: random_resized_crop(size)."""
    return random_resized_crop(size, **kwargs)


def imagenet_eval(size=224, resize=256, **kwargs):
    """The standard ImageNet evaluation recipe: resize_center_crop(resize, size)."""
    return resize_center_crop(resize, size, **kwargs)
