"""Colour and pixel ops (issue 17): native kernels with torchvision's
semantics on uint8 tensors, callable on one image and recognised inside a
torchvision Compose (docs/augmentations.md).

Each op is described by a dict of PixelOp fields, so that the translation
(_tv.py) can copy its state freely; `make_op` turns it into a _C.PixelOp.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from . import _C

Fields = Dict[str, Any]


def make_op(fields: Fields) -> _C.PixelOp:
    op = _C.PixelOp()
    for key, value in fields.items():
        if key == "kind":
            value = getattr(_C.PixelOpKind, value)
        elif key == "interpolation":
            value = getattr(_C.WarpInterpolation, value)
        setattr(op, key, value)
    return op


def _jitter_range(name: str, value: Any, center: float, bound: Tuple[float, float],
                  clip_first_on_zero: bool) -> Optional[Tuple[float, float]]:
    """torchvision ColorJitter._check_input: a number v is [center - v,
    center + v] (floored at 0 for the factors), a pair is taken as is; None
    (no op) when the range is just the centre."""
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"If {name} is a single number, it must be non negative.")
        lo, hi = center - float(value), center + float(value)
        if clip_first_on_zero:
            lo = max(lo, 0.0)
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        lo, hi = float(value[0]), float(value[1])
    else:
        raise TypeError(f"{name} should be a single number or a list/tuple with length 2.")
    if not bound[0] <= lo <= hi <= bound[1]:
        raise ValueError(f"{name} values should be between {bound}, but got {[lo, hi]}.")
    return None if lo == hi == center else (lo, hi)


def jitter_fields(brightness: Optional[Sequence[float]], contrast: Optional[Sequence[float]],
                  saturation: Optional[Sequence[float]], hue: Optional[Sequence[float]]) -> Fields:
    """ColorJitter's fields from its parsed ranges (None: not applied)."""
    f: Fields = {"kind": "COLOR_JITTER"}
    for name, r in (("brightness", brightness), ("contrast", contrast), ("saturation", saturation), ("hue", hue)):
        f["has_" + name] = r is not None
        if r is not None:
            f[name] = [float(r[0]), float(r[1])]
    return f


def _pair(value: Any, name: str) -> Tuple[int, int]:
    if isinstance(value, (int, float)):
        return int(value), int(value)
    v = list(value)
    if len(v) == 1:
        return int(v[0]), int(v[0])
    if len(v) != 2:
        raise ValueError(f"{name} should have 1 or 2 values, got {v}")
    return int(v[0]), int(v[1])


def blur_fields(kernel_size: Any, sigma: Any) -> Fields:
    """GaussianBlur's fields: kernel (width, height) and the sigma range."""
    kw, kh = _pair(kernel_size, "kernel_size")
    if isinstance(sigma, (int, float)):
        lo = hi = float(sigma)
    else:
        s = [float(v) for v in sigma]
        lo, hi = (s[0], s[0]) if len(s) == 1 else (s[0], s[1])
    return {"kind": "GAUSSIAN_BLUR", "kernel_width": kw, "kernel_height": kh, "sigma": [lo, hi]}


class PixelTransform:
    """A native colour or pixel op. Called on one uint8 (3, H, W) tensor it
    returns a new uint8 tensor; its random parameters are drawn from a seed
    taken from torch's default generator (torch.manual_seed makes calls
    reproducible). Inside a feedline Loader (a torchvision Compose or a
    list of these after the resize) it runs fused in C++ on the sample's
    own random stream."""

    fields: Fields
    _args: Dict[str, Any]

    def op(self) -> _C.PixelOp:
        return make_op(self.fields)

    def __call__(self, img: Any) -> Any:
        if type(img).__module__.startswith("PIL."):  # a PIL image (a Python op's input): RGB in, RGB out
            import numpy as np
            from PIL import Image
            chw = torch.from_numpy(np.array(img.convert("RGB"))).permute(2, 0, 1)
            return Image.fromarray(self(chw).permute(1, 2, 0).contiguous().numpy())
        if not isinstance(img, torch.Tensor) or img.dtype != torch.uint8 or img.ndim != 3 or img.shape[0] != 3:
            what = f"{img.dtype} tensor of shape {tuple(img.shape)}" if isinstance(img, torch.Tensor) else type(img)
            raise TypeError(f"{type(self).__name__} takes a uint8 tensor of shape (3, H, W), got {what}")
        seed = int(torch.randint(0, 2**62, (1,)).item())
        out = _C.apply_pixel_ops([self.op()], img.detach().cpu().contiguous().numpy(), seed)
        return torch.from_numpy(out)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._args.items())
        return f"{type(self).__name__}({args})"


class ColorJitter(PixelTransform):
    """torchvision ColorJitter: brightness, contrast, saturation and hue
    factors uniform in their ranges, applied in a random order."""

    def __init__(self, brightness: Any = 0, contrast: Any = 0, saturation: Any = 0, hue: Any = 0) -> None:
        self._args = {"brightness": brightness, "contrast": contrast, "saturation": saturation, "hue": hue}
        self.brightness = _jitter_range("brightness", brightness, 1.0, (0, float("inf")), True)
        self.contrast = _jitter_range("contrast", contrast, 1.0, (0, float("inf")), True)
        self.saturation = _jitter_range("saturation", saturation, 1.0, (0, float("inf")), True)
        self.hue = _jitter_range("hue", hue, 0.0, (-0.5, 0.5), False)
        self.fields = jitter_fields(self.brightness, self.contrast, self.saturation, self.hue)


class Grayscale(PixelTransform):
    """torchvision Grayscale(num_output_channels=3): the luma in all three
    channels (one output channel is not native: batches are RGB)."""

    def __init__(self, num_output_channels: int = 3) -> None:
        if num_output_channels != 3:
            raise ValueError("feedline's Grayscale keeps 3 channels (num_output_channels=3)")
        self._args = {"num_output_channels": num_output_channels}
        self.fields = {"kind": "GRAYSCALE", "p": 1.0}


class _RandomApply(PixelTransform):
    _kind = ""

    def __init__(self, p: float = 0.5, **params: Any) -> None:
        self._args = {**params, "p": p}
        self.p = float(p)
        self.fields = {"kind": self._kind, "p": self.p, **params}


class RandomGrayscale(_RandomApply):
    """torchvision RandomGrayscale(p=0.1)."""
    _kind = "GRAYSCALE"

    def __init__(self, p: float = 0.1) -> None:
        super().__init__(p)


class RandomInvert(_RandomApply):
    """torchvision RandomInvert(p)."""
    _kind = "INVERT"


class RandomAutocontrast(_RandomApply):
    """torchvision RandomAutocontrast(p)."""
    _kind = "AUTOCONTRAST"


class RandomEqualize(_RandomApply):
    """torchvision RandomEqualize(p)."""
    _kind = "EQUALIZE"


class RandomPosterize(_RandomApply):
    """torchvision RandomPosterize(bits, p): keeps the top `bits` bits."""
    _kind = "POSTERIZE"

    def __init__(self, bits: int, p: float = 0.5) -> None:
        super().__init__(p, bits=int(bits))


class RandomSolarize(_RandomApply):
    """torchvision RandomSolarize(threshold, p): inverts values >= threshold."""
    _kind = "SOLARIZE"

    def __init__(self, threshold: float, p: float = 0.5) -> None:
        super().__init__(p, threshold=float(threshold))


class RandomVerticalFlip(_RandomApply):
    """torchvision RandomVerticalFlip(p): the rows in reverse order."""
    _kind = "VERTICAL_FLIP"


class RandomAdjustSharpness(_RandomApply):
    """torchvision RandomAdjustSharpness(sharpness_factor, p)."""
    _kind = "ADJUST_SHARPNESS"

    def __init__(self, sharpness_factor: float, p: float = 0.5) -> None:
        super().__init__(p, factor=float(sharpness_factor))
        self._args = {"sharpness_factor": sharpness_factor, "p": p}


class GaussianBlur(PixelTransform):
    """torchvision GaussianBlur(kernel_size, sigma): sigma uniform in its
    range per image, reflect padding."""

    def __init__(self, kernel_size: Any, sigma: Any = (0.1, 2.0)) -> None:
        self._args = {"kernel_size": kernel_size, "sigma": sigma}
        self.fields = blur_fields(kernel_size, sigma)
        _C.check_pixel_ops([self.op()])


class _NotNative(ValueError):
    """A parameter the native op does not support (the message names it)."""


# InterpolationMode values (and the PIL constants torchvision accepts) the
# warp supports.
_WARP_INTERPOLATION = {"nearest": "NEAREST", "bilinear": "BILINEAR", 0: "NEAREST", 2: "BILINEAR"}


def _warp_interpolation(mode: Any) -> str:
    key = getattr(mode, "value", mode)
    if key not in _WARP_INTERPOLATION:
        raise _NotNative(f"interpolation {getattr(mode, 'name', mode)} is not native for rotations and affine "
                         "warps (NEAREST and BILINEAR are, as on torchvision tensors)")
    return _WARP_INTERPOLATION[key]


def _fill_fields(fill: Any) -> Fields:
    """torchvision's fill for a uint8 RGB tensor: None (zero padding, no
    mask blend), a number, or 1 or 3 values."""
    if fill is None:
        return {"has_fill": False}
    if isinstance(fill, dict):
        raise _NotNative("fill given per type (a dict): not native")
    if isinstance(fill, (int, float)):
        values = [float(fill)] * 3
    else:
        v = [float(f) for f in fill]
        if len(v) not in (1, 3):
            raise ValueError(f"fill has {len(v)} values for 3 channels (1 or 3 are accepted)")
        values = v * (3 // len(v))
    return {"has_fill": True, "fill": values}


def _range(value: Any, name: str, sizes: Tuple[int, ...] = (2,)) -> List[float]:
    """torchvision's _setup_angle: a number v is [-v, v] (v >= 0), a
    sequence of an accepted length is taken as is."""
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"If {name} is a single number, it must be positive.")
        return [-float(value), float(value)]
    v = [float(x) for x in value]
    if len(v) not in sizes:
        raise ValueError(f"{name} should be a sequence of length {' or '.join(map(str, sizes))}.")
    return v


def rotation_fields(degrees: Any, interpolation: Any, expand: bool, center: Any, fill: Any) -> Fields:
    if expand:
        raise _NotNative("expand=True changes the output size per angle: not native (expand=False is)")
    if center is not None:
        raise _NotNative(f"center={list(center)}: a custom centre is not native (center=None is)")
    return {"kind": "ROTATION", "degrees": _range(degrees, "degrees"),
            "interpolation": _warp_interpolation(interpolation), **_fill_fields(fill)}


def affine_fields(degrees: Any, translate: Any, scale: Any, shear: Any, interpolation: Any, fill: Any,
                  center: Any) -> Fields:
    if center is not None:
        raise _NotNative(f"center={list(center)}: a custom centre is not native (center=None is)")
    f: Fields = {"kind": "AFFINE", "degrees": _range(degrees, "degrees"),
                 "interpolation": _warp_interpolation(interpolation), **_fill_fields(fill)}
    if translate is not None:
        t = [float(v) for v in translate]
        if len(t) != 2 or not all(0.0 <= v <= 1.0 for v in t):
            raise ValueError("translate should be a sequence of 2 values between 0 and 1")
        f.update(has_translate=True, translate=t)
    if scale is not None:
        sc = [float(v) for v in scale]
        if len(sc) != 2 or not all(v > 0 for v in sc):
            raise ValueError("scale should be a sequence of 2 positive values")
        f.update(has_scale=True, scale_range=sc)
    if shear is not None:
        sh = _range(shear, "shear", (2, 4))
        f.update(has_shear=True, has_shear_y=len(sh) == 4, shear=(sh + [0.0, 0.0])[:4])
    return f


def policy_fields(kind: str, interpolation: Any, fill: Any, num_magnitude_bins: int, num_ops: int = 2,
                  magnitude: int = 9) -> Fields:
    f: Fields = {"kind": kind, "interpolation": _warp_interpolation(interpolation), **_fill_fields(fill),
                 "num_magnitude_bins": int(num_magnitude_bins)}
    if kind == "RAND_AUGMENT":
        if not isinstance(num_ops, int) or num_ops < 0:
            raise ValueError(f"num_ops should be a non-negative integer, but got {num_ops} instead.")
        f.update(num_ops=int(num_ops), magnitude=int(magnitude))
    return f


class RandomRotation(PixelTransform):
    """torchvision RandomRotation(degrees, interpolation, expand=False,
    center=None, fill): an angle uniform in degrees, counter-clockwise,
    same size out; torchvision's tensor-path sampling."""

    def __init__(self, degrees: Any, interpolation: Any = "nearest", expand: bool = False, center: Any = None,
                 fill: Any = 0) -> None:
        self._args = {"degrees": degrees, "interpolation": interpolation, "expand": expand, "center": center,
                      "fill": fill}
        self.fields = rotation_fields(degrees, interpolation, expand, center, fill)
        _C.check_pixel_ops([self.op()])


class RandomAffine(PixelTransform):
    """torchvision RandomAffine(degrees, translate, scale, shear,
    interpolation, fill): parameters drawn as its get_params, around the
    image centre, same size out; torchvision's tensor-path sampling."""

    def __init__(self, degrees: Any, translate: Any = None, scale: Any = None, shear: Any = None,
                 interpolation: Any = "nearest", fill: Any = 0, center: Any = None) -> None:
        self._args = {"degrees": degrees, "translate": translate, "scale": scale, "shear": shear,
                      "interpolation": interpolation, "fill": fill, "center": center}
        self.fields = affine_fields(degrees, translate, scale, shear, interpolation, fill, center)
        _C.check_pixel_ops([self.op()])


class TrivialAugmentWide(PixelTransform):
    """torchvision TrivialAugmentWide: one op of its 14, uniformly, at a
    uniform magnitude bin, signed at random (torchvision v2's op set)."""

    def __init__(self, num_magnitude_bins: int = 31, interpolation: Any = "nearest", fill: Any = None) -> None:
        self._args = {"num_magnitude_bins": num_magnitude_bins, "interpolation": interpolation, "fill": fill}
        self.fields = policy_fields("TRIVIAL_AUGMENT_WIDE", interpolation, fill, num_magnitude_bins)
        _C.check_pixel_ops([self.op()])


class RandAugment(PixelTransform):
    """torchvision RandAugment: num_ops ops of its 14, uniformly, each at
    bin `magnitude`, signed at random (torchvision v2's op set)."""

    def __init__(self, num_ops: int = 2, magnitude: int = 9, num_magnitude_bins: int = 31,
                 interpolation: Any = "nearest", fill: Any = None) -> None:
        self._args = {"num_ops": num_ops, "magnitude": magnitude, "num_magnitude_bins": num_magnitude_bins,
                      "interpolation": interpolation, "fill": fill}
        self.fields = policy_fields("RAND_AUGMENT", interpolation, fill, num_magnitude_bins, num_ops, magnitude)
        _C.check_pixel_ops([self.op()])


class AutoAugment(PixelTransform):
    """torchvision AutoAugment with its ImageNet policy: one of the 25
    sub-policies, uniformly; each of its two ops applied with its own
    probability, at its fixed magnitude bin of 10, signed at random. The
    CIFAR10 and SVHN policies are not native (inside a Compose they run in
    Python)."""

    def __init__(self, policy: Any = "imagenet", interpolation: Any = "nearest", fill: Any = None) -> None:
        self._args = {"policy": policy, "interpolation": interpolation, "fill": fill}
        _imagenet_policy(policy)
        self.fields = policy_fields("AUTO_AUGMENT", interpolation, fill, 10)
        _C.check_pixel_ops([self.op()])


def _imagenet_policy(policy: Any) -> None:
    """Accepts torchvision's AutoAugmentPolicy.IMAGENET (or "imagenet");
    any other policy raises _NotNative naming it."""
    name = str(getattr(policy, "value", policy)).lower()
    if name != "imagenet":
        raise _NotNative(f"AutoAugment policy {name!r}: only the ImageNet policy is native")


# feedline's bounds on AugMix's sizes (kMaxAugMixWidth, kMaxAugMixDepth in feedline/image.h).
_AUGMIX_MAX_WIDTH = 64
_AUGMIX_MAX_DEPTH = 64


def augmix_fields(severity: Any, mixture_width: Any, chain_depth: Any, alpha: Any, all_ops: Any,
                  interpolation: Any, fill: Any) -> Fields:
    """AugMix's fields. Widths and depths past feedline's bounds raise
    _NotNative naming them (torchvision has no bound); severity and alpha
    are checked by the native op (check_pixel_ops)."""
    width, depth = int(mixture_width), int(chain_depth)
    if not 1 <= width <= _AUGMIX_MAX_WIDTH:
        raise _NotNative(f"AugMix mixture_width={width}: native for 1..{_AUGMIX_MAX_WIDTH}")
    if depth > _AUGMIX_MAX_DEPTH:
        raise _NotNative(f"AugMix chain_depth={depth}: native up to {_AUGMIX_MAX_DEPTH} (or <= 0: 1..3 at random)")
    return {**policy_fields("AUG_MIX", interpolation, fill, 10), "severity": max(0, min(int(severity), 2**31)),
            "mixture_width": width, "chain_depth": max(depth, -1), "alpha": float(alpha), "all_ops": bool(all_ops)}


class AugMix(PixelTransform):
    """torchvision AugMix: `mixture_width` chains, each of `chain_depth`
    ops (<= 0: 1 to 3, uniformly) drawn uniformly from its 9 ops (13 with
    all_ops: Brightness, Color, Contrast, Sharpness added), each at a bin
    uniform in [0, severity) of 10, signed at random, every chain applied
    to the original image; the chains blended in float32 with
    Dirichlet([alpha] * mixture_width) weights, and with the original by a
    Beta(alpha, alpha) weight m: m * original + (1 - m) * sum(w_i * chain_i),
    truncated to uint8."""

    def __init__(self, severity: int = 3, mixture_width: int = 3, chain_depth: int = -1, alpha: float = 1.0,
                 all_ops: bool = True, interpolation: Any = "bilinear", fill: Any = None) -> None:
        self._args = {"severity": severity, "mixture_width": mixture_width, "chain_depth": chain_depth,
                      "alpha": alpha, "all_ops": all_ops, "interpolation": interpolation, "fill": fill}
        self.fields = augmix_fields(severity, mixture_width, chain_depth, alpha, all_ops, interpolation, fill)
        _C.check_pixel_ops([self.op()])


PIXEL_CLASSES = ("ColorJitter", "Grayscale", "RandomGrayscale", "RandomInvert", "RandomPosterize", "RandomSolarize",
                 "RandomAutocontrast", "RandomEqualize", "RandomAdjustSharpness", "GaussianBlur",
                 "RandomRotation", "RandomAffine", "TrivialAugmentWide", "RandAugment", "AutoAugment", "AugMix",
                 "RandomVerticalFlip")


def from_torchvision_member(m: Any, name: str) -> Tuple[Optional[Fields], str]:
    """The fields of torchvision member `m` (class `name`, v1 or v2), or
    (None, why it is not native)."""
    if name == "ColorJitter":
        return jitter_fields(m.brightness, m.contrast, m.saturation, m.hue), ""
    if name == "Grayscale":
        if int(m.num_output_channels) != 3:
            return None, "Grayscale(num_output_channels=1) gives one channel: not native (3 is)"
        return {"kind": "GRAYSCALE", "p": 1.0}, ""
    if name == "GaussianBlur":
        return blur_fields(m.kernel_size, m.sigma), ""
    if name in ("RandomRotation", "RandomAffine", "TrivialAugmentWide", "RandAugment", "AutoAugment", "AugMix"):
        try:
            if name == "RandomRotation":
                return rotation_fields(m.degrees, m.interpolation, m.expand, m.center, m.fill), ""
            if name == "RandomAffine":
                return affine_fields(m.degrees, m.translate, m.scale, m.shear, m.interpolation, m.fill,
                                     getattr(m, "center", None)), ""
            if name == "AugMix":
                return augmix_fields(m.severity, m.mixture_width, m.chain_depth, m.alpha, m.all_ops,
                                     m.interpolation, m.fill), ""
            if name == "AutoAugment":
                _imagenet_policy(m.policy)
                return policy_fields("AUTO_AUGMENT", m.interpolation, m.fill, 10), ""
            if name == "TrivialAugmentWide":
                return policy_fields("TRIVIAL_AUGMENT_WIDE", m.interpolation, m.fill, m.num_magnitude_bins), ""
            return policy_fields("RAND_AUGMENT", m.interpolation, m.fill, m.num_magnitude_bins, m.num_ops,
                                 m.magnitude), ""
        except _NotNative as e:
            return None, str(e)
    kinds = {"RandomGrayscale": "GRAYSCALE", "RandomInvert": "INVERT", "RandomAutocontrast": "AUTOCONTRAST",
             "RandomEqualize": "EQUALIZE", "RandomPosterize": "POSTERIZE", "RandomSolarize": "SOLARIZE",
             "RandomAdjustSharpness": "ADJUST_SHARPNESS", "RandomVerticalFlip": "VERTICAL_FLIP"}
    f: Fields = {"kind": kinds[name], "p": float(m.p)}
    if name == "RandomPosterize":
        f["bits"] = int(m.bits)
    elif name == "RandomSolarize":
        f["threshold"] = float(m.threshold)
    elif name == "RandomAdjustSharpness":
        f["factor"] = float(m.sharpness_factor)
    return f, ""
