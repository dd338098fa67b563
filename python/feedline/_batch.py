"""The ops after normalisation and on batches (issue 17): RandomErasing,
MixUp, CutMix and a RandomChoice between the mixes, with
torchvision.transforms.v2's semantics, run by the C++ kernels of
src/image/augment_ops.cc (docs/augmentations.md).

RandomErasing inside a loader runs in the fused image op on the sample's
own random stream, after the output conversion; called here it erases one
tensor (or a batch, with one draw for all, as torchvision does). MixUp and
CutMix inside a loader (Loader(batch_transform=...)) run on each collated
batch as it is handed out, with the batch's parameters drawn from (seed,
epoch, rank, batch index): same seed, same bytes, at any thread count and
after a resume. Called here they take (images, labels) and return new
tensors, as v2 does.
"""
from __future__ import annotations

import numbers
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from . import _C

# torch dtypes of images and their feedline DType (transforms.py's too).
IMAGE_DTYPES = {torch.float32: _C.DType.float32, torch.float16: _C.DType.float16,
           torch.bfloat16: _C.DType.bfloat16, torch.uint8: _C.DType.uint8}


def _seed() -> int:
    """A seed from torch's default generator: torch.manual_seed makes calls reproducible."""
    return int(torch.randint(0, 2**62, (1,)).item())


def _array(t: torch.Tensor) -> np.ndarray:
    """A numpy view of contiguous CPU tensor `t` (bfloat16 as int16)."""
    return t.view(torch.int16).numpy() if t.dtype == torch.bfloat16 else t.numpy()


# -- RandomErasing -----------------------------------------------------------

def erase_fields(p: float, scale: Sequence[float], ratio: Sequence[float], value: Any) -> Dict[str, Any]:
    """EraseOp fields from RandomErasing's arguments, refusing what torchvision
    refuses (v2's messages)."""
    if not isinstance(value, (numbers.Number, str, tuple, list)):
        raise TypeError("Argument value should be either a number or str or a sequence")
    if isinstance(value, str) and value != "random":
        raise ValueError("If value is str, it should be 'random'")
    if not isinstance(scale, Sequence):
        raise TypeError("Scale should be a sequence")
    if not isinstance(ratio, Sequence):
        raise TypeError("Ratio should be a sequence")
    if scale[0] < 0 or scale[1] > 1:
        raise ValueError("Scale should be between 0 and 1")
    if not 0 <= float(p) <= 1:
        raise ValueError("Random erasing probability should be between 0 and 1")
    f: Dict[str, Any] = {"p": float(p), "scale": [float(scale[0]), float(scale[1])],
                         "ratio": [float(ratio[0]), float(ratio[1])]}
    if isinstance(value, str):
        f["random_value"], f["value"] = True, [0.0]
    elif isinstance(value, numbers.Number):
        f["random_value"], f["value"] = False, [float(value)]  # type: ignore[arg-type]
    else:
        f["random_value"], f["value"] = False, [float(v) for v in value]
    return f


def make_erase(fields: Dict[str, Any]) -> _C.EraseOp:
    op = _C.EraseOp()
    for key, v in fields.items():
        setattr(op, key, v)
    return op


class RandomErasing:
    """torchvision RandomErasing(p, scale, ratio, value, inplace), native.
    Called on a float (or uint8) tensor (..., C, H, W) it erases one
    rectangle drawn as torchvision's get_params (one draw for a whole batch,
    as torchvision does); the parameters come from a seed taken from
    torch's default generator. Inside a loader (a torchvision Compose, after
    Normalize, or feedline.transforms.with_random_erasing) it runs in the
    fused op on each sample's own random stream, on the normalised output."""

    def __init__(self, p: float = 0.5, scale: Sequence[float] = (0.02, 0.33), ratio: Sequence[float] = (0.3, 3.3),
                 value: Any = 0.0, inplace: bool = False) -> None:
        self.fields = erase_fields(p, scale, ratio, value)
        self.p, self.scale, self.ratio, self.value, self.inplace = p, scale, ratio, value, inplace

    def op(self) -> _C.EraseOp:
        return make_erase(self.fields)

    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        if not isinstance(img, torch.Tensor) or img.ndim < 3 or img.dtype not in IMAGE_DTYPES:
            what = f"{img.dtype} tensor of shape {tuple(img.shape)}" if isinstance(img, torch.Tensor) else type(img)
            raise TypeError(f"RandomErasing takes a float32/float16/bfloat16/uint8 tensor (..., C, H, W), got {what}")
        contiguous = img.is_contiguous() and img.device.type == "cpu"
        # One copy on the host (the kernels are CPU ones); the result on the input's device.
        out = img if self.inplace and contiguous else img.detach().to("cpu", copy=True).contiguous()
        _C.apply_erase(self.op(), _array(out), IMAGE_DTYPES[out.dtype], _C.Layout.CHW, _seed())
        if self.inplace and out is not img:
            img.copy_(out)
            return img
        return out.to(img.device)

    def __repr__(self) -> str:
        return (f"RandomErasing(p={self.p}, scale={tuple(self.scale)}, ratio={tuple(self.ratio)}, "
                f"value={self.value!r}, inplace={self.inplace})")


def erase_from_torchvision(m: Any) -> Dict[str, Any]:
    """The EraseOp fields of a torchvision RandomErasing (v1 keeps value as
    given; v2 keeps a list of floats, or None for "random")."""
    value = m.value
    if value is None:
        value = "random"
    return erase_fields(m.p, m.scale, m.ratio, value)


# -- MixUp, CutMix -------------------------------------------------------------

class _Mix:
    kind = ""

    def __init__(self, *, alpha: float = 1.0, num_classes: Optional[int] = None) -> None:
        if num_classes is None:
            raise ValueError(f"{type(self).__name__}: num_classes is required (labels become one-hot rows)")
        self.alpha, self.num_classes = float(alpha), int(num_classes)
        _C.check_batch_mix([self.op()])

    def op(self, weight: float = 1.0) -> _C.BatchMixOp:
        op = _C.BatchMixOp()
        op.kind = getattr(_C.BatchMixKind, self.kind)
        op.alpha, op.num_classes, op.weight = self.alpha, self.num_classes, float(weight)
        return op

    def __call__(self, *inputs: Any) -> Any:
        return _call([self.op()], inputs, type(self).__name__)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(alpha={self.alpha}, num_classes={self.num_classes})"


class MixUp(_Mix):
    """torchvision.transforms.v2.MixUp(alpha, num_classes): lam ~ Beta(alpha,
    alpha); images and one-hot labels blended with the batch rolled by one."""
    kind = "MIXUP"


class CutMix(_Mix):
    """torchvision.transforms.v2.CutMix(alpha, num_classes): the rolled
    batch's box pasted in; labels mixed by 1 - box area / image area."""
    kind = "CUTMIX"


class RandomChoice:
    """torchvision RandomChoice over MixUp / CutMix (feedline's or
    torchvision's), one chosen per batch with probabilities p (default
    uniform), as torchvision's reference scripts do."""

    def __init__(self, transforms: Sequence[Any], p: Optional[Sequence[float]] = None) -> None:
        self.transforms = list(transforms)
        self.p = None if p is None else [float(v) for v in p]
        self.choices = mix_ops(self)

    def __call__(self, *inputs: Any) -> Any:
        return _call(self.choices, inputs, "RandomChoice")

    def __repr__(self) -> str:
        return f"RandomChoice(transforms={self.transforms!r}, p={self.p})"


def _tv_name(obj: Any) -> Optional[str]:
    mod = type(obj).__module__ or ""
    return type(obj).__name__ if mod.startswith("torchvision.transforms") else None


def mix_ops(obj: Any) -> List[_C.BatchMixOp]:
    """The BatchMixOps of a feedline or torchvision MixUp, CutMix, or
    RandomChoice of them; ValueError/TypeError naming what is not one."""
    if isinstance(obj, _Mix):
        return [obj.op()]
    name = _tv_name(obj)
    if name in ("MixUp", "CutMix"):
        if getattr(obj, "num_classes", None) is None:
            raise ValueError(f"{name}: num_classes=None (labels already one-hot) is not supported natively; "
                             "give num_classes")
        return [(MixUp if name == "MixUp" else CutMix)(alpha=obj.alpha, num_classes=obj.num_classes).op()]
    if isinstance(obj, RandomChoice) or name == "RandomChoice":
        members = list(obj.transforms)
        p = getattr(obj, "p", None)
        weights = [1.0] * len(members) if p is None else [float(v) for v in p]
        if len(weights) != len(members):
            raise ValueError(f"RandomChoice: {len(weights)} probabilities for {len(members)} transforms")
        ops = []
        for i, (m, w) in enumerate(zip(members, weights)):
            if not (isinstance(m, _Mix) or _tv_name(m) in ("MixUp", "CutMix")):
                raise TypeError(f"RandomChoice member {i} ({type(m).__name__}) is not MixUp or CutMix: a batch "
                                "transform chooses between those")
            op = mix_ops(m)[0]
            op.weight = w
            ops.append(op)
        _C.check_batch_mix(ops)
        return ops
    raise TypeError("batch_transform must be MixUp, CutMix (feedline.transforms or torchvision.transforms.v2) or "
                    f"a RandomChoice of them, got {type(obj).__name__}")


def _layout(images: torch.Tensor, hint: Optional[_C.Layout] = None) -> _C.Layout:
    if hint == _C.Layout.HWC and images.shape[-1] == 3:
        return _C.Layout.HWC
    if images.ndim == 4 and images.shape[1] == 3 or hint == _C.Layout.CHW:
        return _C.Layout.CHW
    return _C.Layout.HWC if images.shape[-1] == 3 else _C.Layout.CHW


def mix(choices: List[_C.BatchMixOp], images: torch.Tensor, labels: torch.Tensor, seed: int, epoch: int = 0,
        stream_id: int = 0, layout: Optional[_C.Layout] = None,
        sample_ids: Optional[Sequence[int]] = None) -> torch.Tensor:
    """Mixes contiguous CPU `images` in place; returns the soft labels."""
    if images.ndim != 4:
        raise ValueError(f"Expected a batched input with 4 dims, but got {images.ndim} dimensions instead.")
    if labels.ndim != 1:
        raise ValueError(f"labels tensor should be of shape (batch_size,) but got shape {tuple(labels.shape)} instead.")
    if labels.shape[0] != images.shape[0]:
        raise ValueError(f"The batch size of the image ({images.shape[0]}) does not match the batch size of the "
                         f"labels ({labels.shape[0]}).")
    if images.dtype not in IMAGE_DTYPES:
        raise TypeError(f"images of dtype {images.dtype} are not supported (float32, float16, bfloat16)")
    lay = _layout(images, layout)
    h, w = (images.shape[2], images.shape[3]) if lay == _C.Layout.CHW else (images.shape[1], images.shape[2])
    params = _C.draw_batch_mix(choices, h, w, seed, epoch, stream_id)
    soft = _C.apply_batch_mix(params, _array(images), IMAGE_DTYPES[images.dtype], lay,
                              labels.to(torch.int64).numpy(), choices[0].num_classes,
                              [] if sample_ids is None else [int(s) for s in sample_ids])
    return torch.from_numpy(soft)


def _call(choices: List[_C.BatchMixOp], inputs: Tuple[Any, ...], who: str) -> Any:
    packed = len(inputs) == 1
    args = inputs[0] if packed else inputs
    if not isinstance(args, (tuple, list)) or len(args) != 2:
        raise TypeError(f"{who} takes (images, labels): a batch of images and its labels")
    images, labels = args
    if not isinstance(images, torch.Tensor) or not isinstance(labels, torch.Tensor):
        raise ValueError(f"{who}: images and labels must be torch.Tensors")
    # One copy on the host (the kernels are CPU ones); the results on the input's device.
    out = images.detach().to("cpu", copy=True).contiguous()
    soft = mix(choices, out, labels.detach().cpu(), _seed(), layout=_C.Layout.CHW)
    result = (out.to(images.device), soft.to(images.device))
    return list(result) if packed and isinstance(args, list) else result


class LoaderMixer:
    """A Loader's batch_transform: mixes each collated host batch in place
    (its image tensor views the ring buffer the loop receives) and replaces
    its labels with the soft labels. The stream of batch `index` is
    (seed, epoch, index * world_size + rank)."""

    def __init__(self, transform: Any, seed: int, rank: int, world_size: int,
                 layout: Optional[_C.Layout], dtype: Optional[_C.DType] = None) -> None:
        self.choices = mix_ops(transform)
        if dtype == _C.DType.uint8 and any(c.kind == _C.BatchMixKind.MIXUP for c in self.choices):
            # Refused here rather than at the first batch (the kernel's own check).
            raise ValueError("batch_transform: MixUp blends float images (torch cannot blend uint8 in place); "
                             "this transform gives uint8 (add ToDtype(torch.float32, scale=True)); CutMix alone "
                             "takes uint8")
        self.seed, self.rank, self.world_size, self.layout = int(seed), int(rank), int(world_size), layout

    def __call__(self, fields: Dict[str, Any], epoch: int, index: int, sample_ids: Any) -> Dict[str, Any]:
        images, labels = fields["image"], fields["label"]
        soft = mix(self.choices, images, labels, self.seed, epoch, index * self.world_size + self.rank,
                   self.layout, list(sample_ids))
        return {**fields, "label": soft}

