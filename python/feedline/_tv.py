"""torchvision transforms as they are: a Compose (v1 or v2) translated into
one native ImageTransform (issue 16, item 3).

A Compose is read member by member, with its parameters, and mapped onto the
fused op's stages: one geometry (RandomResizedCrop; Resize with an optional
CenterCrop or RandomCrop; or RandomCrop, with its padding or a Pad before it,
on the decoded image), an optional horizontal flip, the conversion to a tensor
(ToTensor, PILToTensor, ToImage, ToDtype / ConvertImageDtype) and an optional
Normalize. Whatever has no native equivalent with exactly torchvision's
semantics is named (position, repr, why) in an UnsupportedTransformError;
nothing is ever dropped. With strict=False such members run as Python ops
(docs/python_ops.md): the Compose is split into a native prefix (decode and
geometry), a Python middle and a native suffix (ToTensor, ToDtype,
Normalize), carried by a _C.ImageChain.

torchvision is never imported here: members are recognised by their class's
name and module, so that `import feedline` stays light and works without it.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Tuple

import torch

from . import _C
from ._batch import RandomErasing as _FeedlineErasing
from ._batch import erase_from_torchvision, make_erase
from ._geometry import (
    GEOMETRY_CLASSES,
    NotNative,
    _PadCrop,
    apply_crop_fields,
    from_torchvision_crop,
    from_torchvision_pad,
)
from ._geometry import Pad as _FeedlinePad
from ._geometry import RandomCrop as _FeedlineCrop
from ._pixel import PIXEL_CLASSES, PixelTransform, from_torchvision_member, make_op

_FLOAT_DTYPES = {torch.float32: _C.DType.float32, torch.float16: _C.DType.float16,
                 torch.bfloat16: _C.DType.bfloat16}
# InterpolationMode values, and the PIL constants torchvision also accepts.
_INTERPOLATION = {"bilinear": _C.Interpolation.BILINEAR, "bicubic": _C.Interpolation.BICUBIC,
                  2: _C.Interpolation.BILINEAR, 3: _C.Interpolation.BICUBIC}
# torchvision members with no native op yet, and why (the rest get a generic reason).
_NOT_NATIVE = {
    "Lambda": "a Python function: runs only as a Python op",
    "FiveCrop": "returns several crops per image: no native op",
    "TenCrop": "returns several crops per image: no native op",
}


class UnsupportedTransformError(_C.Error, ValueError):
    """A torchvision transform that feedline cannot run natively. `members`
    lists each member it could not translate (position, repr, reason)."""

    def __init__(self, message: str, members: Sequence[UnsupportedMember]) -> None:
        super().__init__(message)
        self.members = list(members)


@dataclass(frozen=True)
class UnsupportedMember:
    position: str  # "2", or "1.0" inside a nested Compose; "-" for the Compose as a whole
    member: str    # repr() of the member
    reason: str


@dataclass
class Translation:
    """What a torchvision transform became: the native transform and, for
    each member, the native stage it maps onto."""
    source: Any
    transform: _C.ImageTransform  # with `chain`: the native prefix's geometry
    members: List[Tuple[str, str, str]] = field(default_factory=list)  # (position, repr, native stage)
    # strict=False and members without a native equivalent: the split Compose
    # (docs/python_ops.md), and the members that run in Python, with why.
    chain: Optional[_C.ImageChain] = None
    python_members: List[UnsupportedMember] = field(default_factory=list)


def _tv_name(obj: Any) -> Tuple[Optional[str], int]:
    """(class name, 1 or 2) for a torchvision.transforms (v1) or
    torchvision.transforms.v2 class itself (not a user subclass); (None, 0)
    for anything else."""
    cls = type(obj)
    if isinstance(obj, GEOMETRY_CLASSES):  # feedline's own, with torchvision v2's attributes
        return cls.__name__, 2
    mod = cls.__module__ or ""
    if mod.startswith("torchvision.transforms.v2"):
        return cls.__name__, 2
    if mod.startswith("torchvision.transforms"):
        return cls.__name__, 1
    return None, 0


def _flatten(obj: Any, prefix: str = "") -> List[Tuple[str, Any]]:
    name, _ = _tv_name(obj)
    if name == "Compose":
        out: List[Tuple[str, Any]] = []
        for i, m in enumerate(obj.transforms):
            out.extend(_flatten(m, f"{prefix}{i}" if _tv_name(m)[0] != "Compose" else f"{prefix}{i}."))
        return out
    return [(prefix.rstrip(".") or "0", obj)]


def _short_repr(obj: Any) -> str:
    try:
        text = repr(obj)
    except Exception as e:  # a user's __repr__ that raises must not hide the real error
        text = f"<{type(obj).__name__} (repr failed: {e})>"
    text = " ".join(text.split())
    return text if len(text) <= 160 else text[:157] + "..."


def _interpolation(m: Any) -> Tuple[Optional[_C.Interpolation], str]:
    mode = getattr(m, "interpolation", "bilinear")
    key = getattr(mode, "value", mode)
    if key in _INTERPOLATION:
        return _INTERPOLATION[key], ""
    return None, f"interpolation {getattr(mode, 'name', mode)} is not native (BILINEAR and BICUBIC are)"


def _hw(size: Any) -> Tuple[int, int]:
    if isinstance(size, int):
        return size, size
    s = list(size)
    return (int(s[0]), int(s[0])) if len(s) == 1 else (int(s[0]), int(s[1]))


class _State:
    def __init__(self) -> None:
        # "rrc", "resize_short", "resize_exact", "random_crop", "resize_random"
        self.geometry: Optional[str] = None
        self.geometry_pos = ""
        self.geometry_repr = ""
        self.size: Tuple[int, int] = (0, 0)  # output (h, w)
        self.resize_short = 0
        self.cropped = False
        self.scale: List[float] = [0.08, 1.0]
        self.ratio: List[float] = [3 / 4, 4 / 3]
        self.crop_fields: Optional[dict] = None  # "random_crop": _geometry.crop_fields
        self.pending_pad: Optional[dict] = None  # a Pad waiting for its RandomCrop
        self.pad_pos = ""
        self.pad_repr = ""
        self.interpolation = _C.Interpolation.BILINEAR
        self.flip_p: Optional[float] = None
        self.flip_pos = ""
        self.flip_repr = ""
        self.flip_before_geometry = False
        self.tensor: Optional[str] = None  # None (PIL image), "uint8" or "float"
        self.dtype = _C.DType.float32
        self.normalize = False
        self.mean: List[float] = [0.0, 0.0, 0.0]
        self.std: List[float] = [1.0, 1.0, 1.0]
        self.pixel_ops: List[dict] = []  # PixelOp fields (_pixel.py), in order
        self.pixel_pos = ""
        self.erase_ops: List[dict] = []  # EraseOp fields (_batch.py), in order
        self.erase_pos = ""


def _geometry_checks(st: _State, m: Any, name: str) -> List[str]:
    why: List[str] = []
    if st.geometry is not None:
        why.append(f"a second resize or crop after position {st.geometry_pos}: the native op does one")
    if st.pending_pad is not None:
        why.append(f"{name} after the Pad at {st.pad_pos}: not native (a Pad is native before a RandomCrop)")
    interp, reason = _interpolation(m)
    if interp is None:
        why.append(reason)
    else:
        st.interpolation = interp
    # On a PIL image torchvision always antialiases; on a tensor only with antialias=True.
    if st.tensor is not None:
        if st.tensor == "float":
            why.append(f"{name} on a float tensor (after ToTensor/ToDtype) resamples without PIL's 8-bit "
                       "rounding: not native; put it before the conversion")
        elif getattr(m, "antialias", None) is not True:
            why.append(f"{name} on a tensor with antialias={getattr(m, 'antialias', None)!r} does not antialias: "
                       "not native (antialias=True is)")
    return why


def _translate_member(st: _State, pos: str, m: Any) -> Tuple[List[str], str]:
    """Updates `st` with member m; returns (reasons it is not native, the native stage it became)."""
    name, _version = _tv_name(m)
    if isinstance(m, _FeedlineErasing) or name == "RandomErasing":
        return _erase_member(st, pos, m)
    if st.erase_ops:
        return [f"{name or type(m).__name__} after RandomErasing (at {st.erase_pos}): the native erase runs on "
                "the final output; not native; move RandomErasing to the end (after Normalize)"], ""
    if isinstance(m, PixelTransform) or name in PIXEL_CLASSES:
        return _pixel_member(st, pos, m, name or type(m).__name__)
    if isinstance(m, _FeedlineCrop) or name == "RandomCrop":
        return _crop_member(st, pos, m, _version)
    if isinstance(m, _FeedlinePad) or name == "Pad":
        return _pad_member(st, pos, m)
    if name is None:
        if not callable(m):
            return [f"not a transform ({type(m).__name__} is not callable)"], ""
        if hasattr(m, "__code__"):  # a function or lambda: name it where it was defined
            kind = "a lambda" if m.__name__ == "<lambda>" else "a Python function"
            where = f"{m.__module__}.{m.__qualname__}"
        else:
            kind, where = "a Python class", f"{type(m).__module__}.{type(m).__qualname__}"
        return [f"{kind} ({where}): no native op; runs only as a Python op"], ""
    if name == "RandomResizedCrop":
        why = _geometry_checks(st, m, name)
        if why:
            return why, ""
        st.geometry, st.geometry_pos = "rrc", pos
        st.size = _hw(m.size)
        st.scale = [float(v) for v in m.scale]
        st.ratio = [float(v) for v in m.ratio]
        return [], f"crop RANDOM_RESIZED {st.size[0]}x{st.size[1]} scale {st.scale} ratio {st.ratio}"
    if name == "Resize":
        why = _geometry_checks(st, m, name)
        if getattr(m, "max_size", None) is not None:
            why.append(f"max_size={m.max_size}: the output size would depend on each image's shape; not native")
        if why:
            return why, ""
        st.geometry_pos, st.geometry_repr = pos, _short_repr(m)
        size = m.size
        if isinstance(size, int) or len(size) == 1:
            st.geometry = "resize_short"
            st.resize_short = int(size if isinstance(size, int) else size[0])
            st.size = (st.resize_short, st.resize_short)
            return [], f"resize shorter side to {st.resize_short}"
        st.geometry = "resize_exact"
        st.size = _hw(size)
        return [], f"crop RESIZE_FULL {st.size[0]}x{st.size[1]}"
    if name == "CenterCrop":
        h, w = _hw(m.size)
        if st.pixel_ops:
            return [f"CenterCrop after a colour op (at {st.pixel_pos}): the op would see the uncropped image "
                    "(contrast, autocontrast, equalize and blur depend on it); not native; move the op after"], ""
        if st.tensor == "float" and st.geometry is None:
            return ["CenterCrop on a float tensor (after ToTensor/ToDtype): not native; put it before the "
                    "conversion"], ""
        if st.geometry is None:
            if st.pending_pad is not None:
                return [f"CenterCrop after the Pad at {st.pad_pos}: not native (a Pad before a RandomCrop is)"], ""
            st.geometry, st.geometry_pos, st.geometry_repr = "center_crop", pos, _short_repr(m)
            st.size, st.cropped = (h, w), True
            return [], f"crop CENTER_CROP {h}x{w} of the decoded image (zeros where it is smaller)"
        if st.geometry == "resize_short" and not st.cropped:
            s = st.resize_short
            if h > s or w > s:
                return [f"crop {h}x{w} is larger than the resized shorter side {s}: torchvision pads with zeros "
                        "for some images; not native"], ""
            st.size, st.cropped = (h, w), True
            return [], f"crop RESIZE_CENTER {h}x{w} of the resized image"
        if (h, w) == st.size:  # the image is already h x w: torchvision's center crop returns it as is
            return [], "nothing (the image already has this size)"
        return [f"CenterCrop({h}x{w}) after a {st.size[0]}x{st.size[1]} output: a second crop; not native"], ""
    if name == "RandomHorizontalFlip":
        if st.flip_p is not None:
            return [f"a second horizontal flip (the first at {st.flip_pos}): not native"], ""
        st.flip_p, st.flip_pos, st.flip_repr = float(m.p), pos, _short_repr(m)
        st.flip_before_geometry = st.geometry is None
        return [], f"horizontal flip with p={st.flip_p}"
    if name in ("ToTensor", "PILToTensor"):
        if st.tensor is not None:
            return [f"{name} of a tensor: torchvision expects a PIL image here"], ""
        st.tensor = "float" if name == "ToTensor" else "uint8"
        st.dtype = _C.DType.float32 if name == "ToTensor" else _C.DType.uint8
        return [], "float32 CHW, values / 255" if name == "ToTensor" else "uint8 CHW"
    if name == "ToImage":
        if st.tensor is not None:
            return [], "nothing (already a tensor)"
        st.tensor, st.dtype = "uint8", _C.DType.uint8
        return [], "uint8 CHW"
    if name in ("ToDtype", "ConvertImageDtype"):
        dtype = m.dtype
        scale = True if name == "ConvertImageDtype" else bool(getattr(m, "scale", False))
        if isinstance(dtype, dict):
            return ["ToDtype with a dict of dtypes per type: not native"], ""
        if st.tensor is None:
            return [f"{name} before the image is a tensor (add ToImage or PILToTensor first): not native"], ""
        if dtype == torch.uint8:
            if st.tensor == "uint8":
                return [], "nothing (already uint8)"
            return [f"{name}(uint8) of a float tensor: not native"], ""
        if dtype not in _FLOAT_DTYPES:
            return [f"dtype {dtype}: not native (float32, float16, bfloat16 and uint8 are)"], ""
        if st.tensor == "uint8" and not scale:
            return [f"{name}({dtype}, scale=False) keeps values 0..255: not native (scale=True divides by 255)"], ""
        from_uint8 = st.tensor == "uint8"
        st.tensor, st.dtype = "float", _FLOAT_DTYPES[dtype]
        return [], f"{dtype}" + (", values / 255" if from_uint8 else "")
    if name == "Normalize":
        if st.tensor != "float":
            return ["Normalize of a uint8 tensor or PIL image: torchvision needs a float tensor here"], ""
        if st.normalize:
            return ["a second Normalize: not native"], ""
        mean, std = [float(v) for v in m.mean], [float(v) for v in m.std]
        if len(mean) not in (1, 3) or len(std) not in (1, 3):
            return [f"Normalize with {len(mean)} means and {len(std)} stds for 3 channels: not native"], ""
        st.normalize, st.mean, st.std = True, mean * (3 // len(mean)), std * (3 // len(std))
        return [], f"normalize mean {st.mean} std {st.std}"
    return [_NOT_NATIVE.get(name, "no native op yet")], ""


def _pixel_member(st: _State, pos: str, m: Any, name: str) -> Tuple[List[str], str]:
    """A colour or pixel op: native on the 8-bit pixels after the geometry,
    with torchvision's tensor-path arithmetic (docs/augmentations.md)."""
    if isinstance(m, PixelTransform):
        fields, why = dict(m.fields), ""
    else:
        fields_or_none, why = from_torchvision_member(m, name)
        fields = fields_or_none or {}
    if why:
        return [why], ""
    if st.geometry is None:
        if fields.get("kind") == "VERTICAL_FLIP":
            return [f"{name} before the resize or crop: the crop would be taken from the flipped image; not "
                    "native (move it after the resize or crop)"], ""
        return [f"{name} before the resize or crop: its statistics and neighbourhoods would be the full image's; "
                "not native (move it after the resize)"], ""
    if st.tensor == "float":
        return [f"{name} on a float tensor (after ToTensor/ToDtype) skips the 8-bit rounding: not native; "
                "put it before the conversion"], ""
    try:
        _C.check_pixel_ops([make_op(fields)])
    except ValueError as e:
        return [str(e)], ""
    st.pixel_ops.append(fields)
    st.pixel_pos = st.pixel_pos or pos
    return [], f"pixel op {name} (uint8, fused after the resample)"


def _crop_member(st: _State, pos: str, m: Any, version: int) -> Tuple[List[str], str]:
    """RandomCrop: on the decoded image (with its padding, or a Pad's before
    it), or after Resize(int) without padding."""
    try:
        fields = dict(m.fields) if isinstance(m, _FeedlineCrop) else from_torchvision_crop(m, version)
    except (NotNative, ValueError) as e:
        return [str(e)], ""
    h, w = fields["size"]
    pads = any(fields["padding"]) or fields["pad_if_needed"]
    if st.tensor == "float":
        return ["RandomCrop on a float tensor (after ToTensor/ToDtype): not native; put it before the conversion"], ""
    if st.pixel_ops:
        return [f"RandomCrop after a colour op (at {st.pixel_pos}): the op would see the uncropped image; not native; "
                "move the op after"], ""
    if st.geometry == "resize_short" and not st.cropped and st.pending_pad is None:
        s = st.resize_short
        if pads:
            return ["RandomCrop with padding after a Resize: not native (without padding it is)"], ""
        if h > s or w > s:
            return [f"crop {h}x{w} is larger than the resized shorter side {s}: torchvision refuses some images; "
                    "not native"], ""
        st.geometry, st.size, st.cropped = "resize_random", (h, w), True
        return [], f"crop RESIZE_RANDOM {h}x{w} of the resized image"
    if st.geometry is not None:
        return [f"RandomCrop after the resize or crop at {st.geometry_pos}: a second crop; not native"], ""
    if st.pending_pad is not None:
        if pads:
            return [f"RandomCrop with its own padding or pad_if_needed after the Pad at {st.pad_pos} pads twice: "
                    "not native (give the padding to one of them)"], ""
        fields.update(st.pending_pad)
        st.pending_pad = None
    st.geometry, st.geometry_pos, st.geometry_repr = "random_crop", pos, _short_repr(m)
    st.size, st.crop_fields = (h, w), fields
    return [], (f"crop RANDOM_CROP {h}x{w} padding {fields['padding']} ({fields['padding_mode']}"
                f"{', pad_if_needed' if fields['pad_if_needed'] else ''})")


def _pad_member(st: _State, pos: str, m: Any) -> Tuple[List[str], str]:
    """Pad: native as the padding of a RandomCrop right after it."""
    try:
        fields = dict(m.fields) if isinstance(m, _FeedlinePad) else from_torchvision_pad(m)
    except (NotNative, ValueError) as e:
        return [str(e)], ""
    if st.geometry is not None:
        return [f"Pad after the resize or crop at {st.geometry_pos}: not native (a Pad before a RandomCrop is)"], ""
    if st.pending_pad is not None:
        return [f"a second Pad (the first at {st.pad_pos}): not native"], ""
    if st.tensor == "float":
        return ["Pad on a float tensor (after ToTensor/ToDtype): not native; put it before the conversion"], ""
    st.pending_pad, st.pad_pos, st.pad_repr = fields, pos, _short_repr(m)
    return [], f"padding {fields['padding']} ({fields['padding_mode']}) of the RandomCrop after it"


def _geometry_transform(st: _State, t: _C.ImageTransform) -> None:
    """Sets t's crop stage from the translated geometry."""
    if st.geometry == "random_crop":
        assert st.crop_fields is not None
        apply_crop_fields(t, st.crop_fields)
        return
    if st.geometry == "center_crop":
        t.crop = _C.CropMode.CENTER_CROP
        t.height, t.width = st.size
        return
    t.crop = {"rrc": _C.CropMode.RANDOM_RESIZED, "resize_short": _C.CropMode.RESIZE_CENTER,
              "resize_exact": _C.CropMode.RESIZE_FULL, "resize_random": _C.CropMode.RESIZE_RANDOM}[st.geometry or "rrc"]
    t.height, t.width = st.size
    t.scale, t.ratio = st.scale, st.ratio
    if st.geometry in ("resize_short", "resize_random"):
        t.resize_size = st.resize_short


def _erase_member(st: _State, pos: str, m: Any) -> Tuple[List[str], str]:
    """RandomErasing: native on the converted output (after Normalize),
    with torchvision's get_params and its value semantics."""
    try:
        fields = dict(m.fields) if isinstance(m, _FeedlineErasing) else erase_from_torchvision(m)
    except (TypeError, ValueError) as e:
        return [str(e)], ""
    if st.tensor is None:
        return ["RandomErasing on a PIL image: torchvision needs a tensor here (add ToImage/ToTensor first)"], ""
    try:
        _C.check_erase_ops([make_erase(fields)], _C.DType.uint8 if st.tensor == "uint8" else _C.DType.float32)
    except ValueError as e:
        return [str(e)], ""
    st.erase_ops.append(fields)
    st.erase_pos = st.erase_pos or pos
    return [], "random erasing (on the output, after normalisation)"


_PREFIX_MEMBERS = ("RandomResizedCrop", "Resize", "CenterCrop", "RandomCrop", "Pad",
                   "RandomHorizontalFlip") + PIXEL_CLASSES


def _suffix_step(m: Any, last: bool) -> Optional[_C.SuffixStep]:
    """The native step for a member after the Python middle, or None."""
    name, _ = _tv_name(m)
    step = _C.SuffixStep()
    K = _C.SuffixStep.Kind
    if name == "ToTensor":
        step.kind = K.TO_TENSOR
    elif name == "PILToTensor":
        step.kind = K.PIL_TO_TENSOR
    elif name == "ToImage":
        step.kind = K.TO_IMAGE
    elif name in ("ToDtype", "ConvertImageDtype"):
        dtype = m.dtype
        # float16/bfloat16 only last: later arithmetic would run at that precision in torch.
        if isinstance(dtype, dict) or dtype not in _FLOAT_DTYPES or (dtype != torch.float32 and not last):
            return None
        step.kind, step.dtype = K.TO_DTYPE, _FLOAT_DTYPES[dtype]
        step.scale = True if name == "ConvertImageDtype" else bool(getattr(m, "scale", False))
    elif name == "Normalize":
        step.kind = K.NORMALIZE
        step.mean, step.std = [float(v) for v in m.mean], [float(v) for v in m.std]
    else:
        return None
    return step


def _stable_name(m: Any) -> str:
    """A member as the resume fingerprint sees it: torchvision members by
    their repr (parameters), others by where they are defined (a default
    repr holds an address, which changes from run to run)."""
    if _tv_name(m)[0] is not None or isinstance(m, PixelTransform):
        return _short_repr(m)
    if hasattr(m, "__code__"):
        return f"{m.__module__}.{m.__qualname__}"
    return f"{type(m).__module__}.{type(m).__qualname__}"


def _split(transform: Any, exact: bool) -> Optional[Translation]:
    """The Compose as native prefix + Python middle + native suffix, or None
    when no member would run in Python."""
    from ._pyops import chain_runner
    members = _flatten(transform)
    st, end = _State(), 0
    native: List[Tuple[str, str, str]] = []
    for i, (pos, m) in enumerate(members):
        if _tv_name(m)[0] not in _PREFIX_MEMBERS and not isinstance(m, (PixelTransform, _PadCrop)):
            break
        trial = copy.deepcopy(st)
        why, stage = _translate_member(trial, pos, m)
        if why or (trial.flip_p is not None and trial.flip_before_geometry and trial.geometry not in (None, "rrc")):
            break
        st, end = trial, i + 1
        native.append((pos, _short_repr(m), stage))
    if st.geometry is None or st.pending_pad is not None:  # a flip or Pad alone is no prefix: decode only
        st, end, native = _State(), 0, []
    start = len(members)
    steps: List[_C.SuffixStep] = []
    tail: List[Tuple[str, str, str]] = []
    for j in range(len(members) - 1, end - 1, -1):
        step = _suffix_step(members[j][1], j == len(members) - 1)
        if step is None:
            break
        steps.insert(0, step)
        tail.insert(0, (members[j][0], _short_repr(members[j][1]), "native, after the Python members"))
        start = j
    middle = members[end:start]
    if not middle:
        return None
    chain = _C.ImageChain()
    t = _C.ImageTransform()
    P = _C.ImageChain.Prefix
    if st.geometry is None:
        chain.prefix = P.DECODE
    elif st.geometry == "resize_short" and not st.cropped:
        chain.prefix = P.RESIZE_SHORT
        t.resize_size = st.resize_short
    else:
        chain.prefix = P.TRANSFORM
        _geometry_transform(st, t)
    t.hflip_prob = st.flip_p or 0.0
    t.interpolation = st.interpolation
    t.pixel_ops = [make_op(f) for f in st.pixel_ops]
    t.dtype, t.layout, t.normalize = _C.DType.uint8, _C.Layout.HWC, False
    t.dct_scaling = not exact
    chain.transform = t
    names = []
    for _pos, m in middle:
        n = getattr(m, "__name__", None) if hasattr(m, "__code__") else type(m).__name__
        names.append(n or type(m).__name__)
    chain.name = "python:" + "+".join(names)
    chain.members = "|".join(f"{pos}:{_stable_name(m)}" for pos, m in members)
    chain.suffix = steps
    chain.run = chain_runner([(pos, _short_repr(m), m) for pos, m in middle])
    python = [UnsupportedMember(pos, _short_repr(m), "runs in Python") for pos, m in middle]
    native += [(pos, r, "python") for pos, r in ((p, _short_repr(m)) for p, m in middle)] + tail
    return Translation(transform, t, native, chain, python)


def translate(transform: Any, strict: bool = True, *, exact: bool = False) -> Translation:
    """The Translation of a torchvision Compose (v1 or v2) or one of its
    members. Natively if every member has a native equivalent; otherwise,
    with strict=False, split into native prefix, Python middle and native
    suffix (Translation.chain; docs/python_ops.md); with strict=True it
    raises UnsupportedTransformError naming every member that has no native
    equivalent. `exact` decodes JPEGs at full size (PIL's exact input)
    instead of a reduced DCT scale."""
    st = _State()
    bad: List[UnsupportedMember] = []
    members: List[Tuple[str, str, str]] = []
    for pos, m in _flatten(transform):
        why, stage = _translate_member(st, pos, m)
        r = _short_repr(m)
        bad.extend(UnsupportedMember(pos, r, w) for w in why)
        if not why:
            members.append((pos, r, stage))
    whole = _short_repr(transform)
    if st.geometry is None:
        bad.append(UnsupportedMember("-", whole, "no RandomResizedCrop, Resize or RandomCrop: images of different "
                                     "sizes cannot be batched natively"))
    elif st.geometry == "resize_short" and not st.cropped:
        bad.append(UnsupportedMember(st.geometry_pos, st.geometry_repr, "Resize(int) without a CenterCrop keeps each "
                                     "image's aspect ratio: sizes differ, not batchable natively; add CenterCrop "
                                     "or RandomCrop, or give Resize((h, w))"))
    if st.pending_pad is not None:
        bad.append(UnsupportedMember(st.pad_pos, st.pad_repr, "Pad without a RandomCrop after it: not native "
                                     "(the output size would follow each image's; a Pad before a RandomCrop "
                                     "is native)"))
    if st.flip_p is not None and st.flip_before_geometry and st.geometry not in (None, "rrc"):
        bad.append(UnsupportedMember(st.flip_pos, st.flip_repr, "a flip before Resize/CenterCrop is not "
                                     "the same as after it (odd centre offsets): not native; move it after"))
    if st.tensor is None:
        bad.append(UnsupportedMember("-", whole, "no ToTensor, PILToTensor or ToImage: torchvision would return "
                                     "a PIL image, which cannot be batched"))
    if bad and not strict:
        split = _split(transform, exact)
        if split is not None:
            reasons: dict = {}
            for b in bad:
                reasons[b.position] = f"{reasons[b.position]}; {b.reason}" if b.position in reasons else b.reason
            split.python_members = [UnsupportedMember(p.position, p.member, reasons.get(p.position, p.reason))
                                    for p in split.python_members]
            return split
    if bad:
        lines = "\n".join(f"  {b.member} at position {b.position}: {b.reason}" for b in bad)
        tail = ("strict=True refuses Python fallbacks (strict=False runs such members as Python ops)" if strict else
                "no member would run in Python, so a Python fallback cannot help")
        raise UnsupportedTransformError(
            f"cannot run this torchvision transform natively ({len(bad)} problem{'s' * (len(bad) != 1)}); "
            f"{tail}:\n{lines}", bad)
    t = _C.ImageTransform()
    _geometry_transform(st, t)
    t.hflip_prob = st.flip_p or 0.0
    t.interpolation = st.interpolation
    t.pixel_ops = [make_op(f) for f in st.pixel_ops]
    t.dtype = st.dtype
    t.layout = _C.Layout.CHW
    t.normalize = st.normalize
    t.erase_ops = [make_erase(f) for f in st.erase_ops]
    if st.normalize:
        t.mean, t.std = st.mean, st.std
    t.dct_scaling = not exact
    return Translation(transform, t, members)


def from_torchvision(transform: Any, strict: bool = True, *, exact: bool = False) -> _C.ImageTransform:
    """The native ImageTransform that does what torchvision `transform` (a
    Compose, v1 or v2, or one member) does to a PIL image (see translate).
    A Compose that needs Python ops has none: pass it to feedline.Loader."""
    t = translate(transform, strict, exact=exact)
    if t.chain is not None:
        lines = "\n".join(f"  {b.member} at position {b.position}: {b.reason}" for b in t.python_members)
        raise UnsupportedTransformError("this transform needs Python ops, which only a feedline.Loader runs "
                                        f"(pass it as transform=):\n{lines}", t.python_members)
    return t.transform


def is_torchvision(transform: Any) -> bool:
    """True for a torchvision.transforms / .v2 object (Compose or member)."""
    return _tv_name(transform)[0] is not None
