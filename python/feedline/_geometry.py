"""Geometry without a resize (issue 17): RandomCrop and Pad on the decoded
image, with torchvision v2's semantics (docs/augmentations.md, "RandomCrop
and Pad"). In a loader they are the fused op's crop stage
(CropMode.RANDOM_CROP, and RESIZE_RANDOM for Resize(s) + RandomCrop);
called on one uint8 (3, H, W) tensor they return a new tensor.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch

from . import _C

Fields = Dict[str, Any]

_MODES = {"constant": _C.PaddingMode.CONSTANT, "edge": _C.PaddingMode.EDGE,
          "reflect": _C.PaddingMode.REFLECT, "symmetric": _C.PaddingMode.SYMMETRIC}


class NotNative(ValueError):
    """A parameter the native op does not support (the message names it)."""


def parse_padding(padding: Any) -> List[int]:
    """torchvision's padding as the user writes it (an int, or 1, 2 or 4
    values) as [left, top, right, bottom]."""
    if padding is None:
        return [0, 0, 0, 0]
    if isinstance(padding, int):
        values = [padding] * 4
    else:
        v = [int(x) for x in padding]
        if len(v) == 1:
            values = v * 4
        elif len(v) == 2:
            values = [v[0], v[1], v[0], v[1]]
        elif len(v) == 4:
            values = v
        else:
            raise ValueError(f"Padding must be an int or a 1, 2, or 4 element tuple or list. Found {len(v)}")
    if any(x < 0 for x in values):
        raise NotNative(f"negative padding {values} crops the image: not native")
    return values


def fill_values(fill: Any) -> List[int]:
    """A constant fill for a uint8 RGB image: a number, or 1 or 3 values, each a whole number in 0..255."""
    if fill is None:
        return [0, 0, 0]
    if isinstance(fill, dict):
        raise NotNative("fill given per type (a dict): not native")
    v = [fill] if isinstance(fill, (int, float)) else list(fill)
    if len(v) not in (1, 3):
        raise ValueError(f"fill has {len(v)} values for 3 channels (1 or 3 are accepted)")
    for x in v:
        if float(x) != int(x) or not 0 <= int(x) <= 255:
            raise NotNative(f"fill {fill!r} is not a whole 8-bit value (0..255): not native")
    return [int(x) for x in v] * (3 // len(v))


def mode_value(padding_mode: Any) -> _C.PaddingMode:
    if padding_mode not in _MODES:
        raise ValueError(f"padding_mode should be one of {list(_MODES)}, got {padding_mode!r}")
    return _MODES[padding_mode]


def crop_fields(size: Tuple[int, int], padding: List[int], pad_if_needed: bool, fill: List[int],
                padding_mode: str) -> Fields:
    """The ImageTransform fields of RandomCrop(size, ...): size (h, w),
    padding [left, top, right, bottom]."""
    return {"size": (int(size[0]), int(size[1])), "padding": list(padding), "pad_if_needed": bool(pad_if_needed),
            "pad_fill": list(fill), "padding_mode": padding_mode}


def apply_crop_fields(t: _C.ImageTransform, f: Fields) -> None:
    t.crop = _C.CropMode.RANDOM_CROP
    t.height, t.width = f["size"]
    t.padding = f["padding"]
    t.pad_if_needed = f["pad_if_needed"]
    t.pad_fill = f["pad_fill"]
    t.padding_mode = mode_value(f["padding_mode"])


def from_torchvision_crop(m: Any, version: int) -> Fields:
    """The fields of a torchvision RandomCrop (v1 or v2); raises NotNative."""
    size = (int(m.size[0]), int(m.size[1]))
    if version == 2:  # v2 keeps its parsed padding: [left, right, top, bottom]
        p = m.padding
        padding = [0, 0, 0, 0] if p is None else [int(p[0]), int(p[2]), int(p[1]), int(p[3])]
        if any(x < 0 for x in padding):
            raise NotNative(f"negative padding {padding} crops the image: not native")
    else:
        padding = parse_padding(m.padding)
        if m.pad_if_needed and any(padding) and m.padding_mode in ("reflect", "symmetric"):
            # v1 pads twice (its padding, then what is missing), mirroring the
            # padded image the second time; v2 pads once.
            raise NotNative("v1 RandomCrop with padding, pad_if_needed and a mirroring padding_mode pads twice "
                            "(v2 pads once): not native; use torchvision.transforms.v2")
    mode_value(m.padding_mode)
    return crop_fields(size, padding, bool(m.pad_if_needed), fill_values(m.fill), m.padding_mode)


def from_torchvision_pad(m: Any) -> Fields:
    """Pad(padding, fill, padding_mode) as the padding of the RandomCrop after it."""
    mode_value(m.padding_mode)
    return {"padding": parse_padding(m.padding), "pad_fill": fill_values(m.fill), "padding_mode": m.padding_mode}


def _check_image(name: str, img: Any) -> Optional[torch.Tensor]:
    """None for a PIL image; the tensor if it is uint8 (3, H, W); TypeError otherwise."""
    if type(img).__module__.startswith("PIL."):
        return None
    if not isinstance(img, torch.Tensor) or img.dtype != torch.uint8 or img.ndim != 3 or img.shape[0] != 3:
        what = f"{img.dtype} tensor of shape {tuple(img.shape)}" if isinstance(img, torch.Tensor) else type(img)
        raise TypeError(f"{name} takes a uint8 tensor of shape (3, H, W), got {what}")
    return img


class _Geometry:
    """A geometry op with torchvision's attribute names (a Compose reads
    them as it reads torchvision's own), callable on one image."""

    _args: Dict[str, Any]

    def apply(self, chw: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def __call__(self, img: Any) -> Any:
        chw = _check_image(type(self).__name__, img)
        if chw is None:  # a PIL image: RGB in, RGB out
            import numpy as np
            from PIL import Image
            rgb = torch.from_numpy(np.array(img.convert("RGB"))).permute(2, 0, 1)
            return Image.fromarray(self(rgb).permute(1, 2, 0).contiguous().numpy())
        return self.apply(chw.detach().cpu().contiguous())

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._args.items())
        return f"{type(self).__name__}({args})"


class _PadCrop(_Geometry):
    """RandomCrop and Pad: the crop drawn from a seed taken from torch's
    default generator (torch.manual_seed makes calls reproducible)."""

    fields: Fields

    def transform_for(self, height: int, width: int) -> _C.ImageTransform:
        raise NotImplementedError

    def apply(self, chw: torch.Tensor) -> torch.Tensor:
        t = self.transform_for(int(chw.shape[1]), int(chw.shape[2]))
        seed = int(torch.randint(0, 2**62, (1,)).item())
        out, _top, _left = _C.pad_crop(chw.numpy(), t, seed)
        return torch.from_numpy(out)


class RandomCrop(_PadCrop):
    """torchvision RandomCrop(size, padding, pad_if_needed, fill,
    padding_mode), v2's semantics: the padding and what pad_if_needed adds
    in one pad, then top and left uniform. In a loader it crops the decoded
    image (no resize), or follows Resize(s) (no padding)."""

    def __init__(self, size: Any, padding: Any = None, pad_if_needed: bool = False, fill: Any = 0,
                 padding_mode: str = "constant") -> None:
        self._args = {"size": size, "padding": padding, "pad_if_needed": pad_if_needed, "fill": fill,
                      "padding_mode": padding_mode}
        mode_value(padding_mode)
        self.fields = crop_fields(_size_hw(size, "RandomCrop"), parse_padding(padding), pad_if_needed,
                                  fill_values(fill), padding_mode)

    def transform_for(self, height: int, width: int) -> _C.ImageTransform:
        t = _C.ImageTransform()
        apply_crop_fields(t, self.fields)
        return t


class Pad(_PadCrop):
    """torchvision Pad(padding, fill, padding_mode). In a loader it is native
    when a RandomCrop follows it (it becomes that crop's padding)."""

    def __init__(self, padding: Any, fill: Any = 0, padding_mode: str = "constant") -> None:
        self._args = {"padding": padding, "fill": fill, "padding_mode": padding_mode}
        mode_value(padding_mode)
        self.fields = {"padding": parse_padding(padding), "pad_fill": fill_values(fill), "padding_mode": padding_mode}

    def transform_for(self, height: int, width: int) -> _C.ImageTransform:
        p = self.fields["padding"]
        size = (height + p[1] + p[3], width + p[0] + p[2])
        t = _C.ImageTransform()
        apply_crop_fields(t, crop_fields(size, p, False, self.fields["pad_fill"], self.fields["padding_mode"]))
        return t


def _size_hw(size: Any, name: str) -> Tuple[int, int]:
    hw = (int(size),) if isinstance(size, int) else tuple(int(s) for s in size)
    if len(hw) == 1:
        hw = (hw[0], hw[0])
    if len(hw) != 2 or min(hw) < 1:
        raise ValueError(f"{name} size should be a positive int or (h, w), got {size!r}")
    return hw[0], hw[1]


_RESAMPLE = {"bilinear": _C.Interpolation.BILINEAR, "bicubic": _C.Interpolation.BICUBIC}


def _resample_mode(interpolation: Any) -> str:
    key = getattr(interpolation, "value", interpolation)
    key = {2: "bilinear", 3: "bicubic"}.get(key, key)
    if key not in _RESAMPLE:
        raise ValueError(f"interpolation {getattr(interpolation, 'name', interpolation)} is not native "
                         "(bilinear and bicubic are)")
    return str(key)


def _resized_crop(chw: torch.Tensor, box: Tuple[int, int, int, int], out_hw: Tuple[int, int],
                  interpolation: str) -> torch.Tensor:
    return torch.from_numpy(_C.resized_crop(chw.numpy(), box, out_hw[0], out_hw[1], _RESAMPLE[interpolation]))


class RandomResizedCrop(_Geometry):
    """torchvision RandomResizedCrop(size, scale, ratio, interpolation): the
    box from get_params' distribution, resized with Pillow's antialiased
    filters (the loader's resample; torchvision's PIL path, and its tensor
    path with antialias=True, within one level on average)."""

    def __init__(self, size: Any, scale: Any = (0.08, 1.0), ratio: Any = (3 / 4, 4 / 3),
                 interpolation: Any = "bilinear", antialias: bool = True) -> None:
        self._args = {"size": size, "scale": scale, "ratio": ratio, "interpolation": interpolation}
        self.size = _size_hw(size, "RandomResizedCrop")
        self.scale, self.ratio = [float(v) for v in scale], [float(v) for v in ratio]
        self.interpolation = _resample_mode(interpolation)
        if antialias is not True:
            raise ValueError("RandomResizedCrop: only antialias=True is native")
        self.antialias = True

    def apply(self, chw: torch.Tensor) -> torch.Tensor:
        t = _C.ImageTransform()
        t.crop, (t.height, t.width) = _C.CropMode.RANDOM_RESIZED, self.size
        t.scale, t.ratio = self.scale, self.ratio
        seed = int(torch.randint(0, 2**62, (1,)).item())
        box = _C.choose_crop(t, int(chw.shape[2]), int(chw.shape[1]), seed)
        return _resized_crop(chw, box, self.size, self.interpolation)


class Resize(_Geometry):
    """torchvision Resize(size, interpolation): an int resizes the shorter
    side (the longer int(size * long / short)), (h, w) both; antialiased."""

    def __init__(self, size: Any, interpolation: Any = "bilinear", max_size: Any = None,
                 antialias: bool = True) -> None:
        self._args = {"size": size, "interpolation": interpolation}
        if max_size is not None:
            raise ValueError("Resize: max_size is not native")
        if antialias is not True:
            raise ValueError("Resize: only antialias=True is native")
        self.size = size if isinstance(size, int) else list(size)
        _size_hw(size, "Resize")
        self.interpolation = _resample_mode(interpolation)
        self.max_size, self.antialias = None, True

    def apply(self, chw: torch.Tensor) -> torch.Tensor:
        h, w = int(chw.shape[1]), int(chw.shape[2])
        if isinstance(self.size, int) or len(self.size) == 1:
            s = self.size if isinstance(self.size, int) else self.size[0]
            out = (int(s * h / w), s) if w <= h else (s, int(s * w / h))
        else:
            out = (int(self.size[0]), int(self.size[1]))
        return _resized_crop(chw, (0, 0, w, h), out, self.interpolation)


class CenterCrop(_Geometry):
    """torchvision CenterCrop(size): the centre crop, zeros around an image
    smaller than it (F.center_crop)."""

    def __init__(self, size: Any) -> None:
        self._args = {"size": size}
        self.size = _size_hw(size, "CenterCrop")

    def apply(self, chw: torch.Tensor) -> torch.Tensor:
        t = _C.ImageTransform()
        t.crop, (t.height, t.width) = _C.CropMode.CENTER_CROP, self.size
        out, _top, _left = _C.pad_crop(chw.numpy(), t, 0)
        return torch.from_numpy(out)


class RandomHorizontalFlip(_Geometry):
    """torchvision RandomHorizontalFlip(p): the columns in reverse order with probability p."""

    def __init__(self, p: float = 0.5) -> None:
        self._args = {"p": p}
        self.p = float(p)

    def apply(self, chw: torch.Tensor) -> torch.Tensor:
        flip = bool(torch.rand(()) < self.p)
        return chw.flip(-1).contiguous() if flip else chw.clone()


GEOMETRY_CLASSES = (RandomResizedCrop, Resize, CenterCrop, RandomHorizontalFlip)
