"""Samples with several named fields (docs/fields.md): the `fields=` argument
of feedline.Loader, parsed into the engine's field requests, and each
batch's fields turned into what a training loop uses."""
from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np
import torch

from . import _C

# The kinds a field may name explicitly ("text:caption").
_KINDS = {
    "image": _C.FieldRequest.Kind.IMAGE,
    "label": _C.FieldRequest.Kind.LABEL,
    "text": _C.FieldRequest.Kind.TEXT,
    "json": _C.FieldRequest.Kind.JSON,
    "ndarray": _C.FieldRequest.Kind.NDARRAY,
    "bytes": _C.FieldRequest.Kind.BYTES,
}
_KIND_NAMES = {v: k for k, v in _KINDS.items()}
COLLATES = ("stack", "list")

# What a field's value may be: "jpg;png", "text:caption", or a list of part names.
FieldValue = Union[str, Sequence[str]]


@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # "image", "label", "text", "json", "ndarray", "bytes"
    parts: List[str]


def parse(fields: Mapping[str, FieldValue]) -> List[Field]:
    """{"image": "jpg;png", "label": "cls", "caption": "txt", "meta": "json"}
    -> fields in order. A value lists the sample parts (WebDataset member
    extensions) that may hold the field, first present wins, separated by
    ';'; the first part's name gives the kind as webdataset names them
    (image extensions, cls, txt, json, npy; anything else is bytes) unless
    the value starts with "<kind>:" ("text:caption", "bytes:jpg")."""
    if not isinstance(fields, Mapping) or not fields:
        raise ValueError(f"fields must be a non-empty dict {{name: parts}}, got {fields!r}")
    out: List[Field] = []
    for name, value in fields.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"a field name must be a non-empty str, got {name!r}")
        kind: Optional[str] = None
        if isinstance(value, str):
            text = value.strip()
            head, sep, rest = text.partition(":")
            if sep and head.strip().lower() in _KINDS:
                kind, text = head.strip().lower(), rest
            parts = [p.strip().lower() for p in text.split(";") if p.strip()]
        elif isinstance(value, Sequence) and all(isinstance(p, str) for p in value):
            parts = [p.strip().lower() for p in value if p.strip()]
        else:
            raise ValueError(f"field {name!r}: expected parts such as 'jpg;png' or a list of them, got {value!r}")
        if not parts:
            raise ValueError(f"field {name!r}: no parts named in {value!r}")
        if kind is None:
            kind = _KIND_NAMES[_C.kind_of_part(parts[0])]
        out.append(Field(name, kind, parts))
    return out


def requests(fields: List[Field], transforms: Mapping[str, Any]) -> List[Any]:
    """The engine's FieldRequests; `transforms` maps each image field to its
    native ImageTransform."""
    reqs = []
    for f in fields:
        r = _C.FieldRequest()
        r.name, r.kind, r.parts = f.name, _KINDS[f.kind], list(f.parts)
        if f.kind == "image":
            r.transform = transforms[f.name]
        reqs.append(r)
    return reqs


def _ndarray(blob: bytes) -> np.ndarray:
    # The engine checked the header against the size (src/pipelines/npy.cc).
    return np.lib.format.read_array(io.BytesIO(blob), allow_pickle=False)


def collate(fields: List[Field], raw: Dict[str, Any], sample_ids: np.ndarray, collate_mode: str) -> Dict[str, Any]:
    """One batch as the loop gets it: images and labels as tensors (already
    collated by the engine), text as lists of str, JSON as lists of values,
    ndarrays stacked into one tensor when their shapes and dtypes agree
    (else a ValueError naming the samples, or lists of tensors with
    collate="list"), bytes as lists of bytes."""
    out: Dict[str, Any] = {}
    for f in fields:
        v = raw[f.name]
        if f.kind in ("image", "label"):
            out[f.name] = v
        elif f.kind == "text":
            out[f.name] = [b.decode("utf-8") for b in v]
        elif f.kind == "json":
            out[f.name] = [json.loads(b) for b in v]
        elif f.kind == "ndarray":
            arrays = [_ndarray(b) for b in v]
            if collate_mode == "list":
                out[f.name] = [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]
                continue
            if arrays:
                first = arrays[0]
                for i, a in enumerate(arrays):
                    if a.shape != first.shape or a.dtype != first.dtype:
                        raise ValueError(
                            f"field {f.name!r}: sample {int(sample_ids[i])} has shape {a.shape} {a.dtype}, "
                            f"sample {int(sample_ids[0])} has {first.shape} {first.dtype}: arrays of one batch "
                            "must agree to be stacked; pass collate=\"list\" to get a list per batch")
                out[f.name] = torch.from_numpy(np.stack(arrays))
            else:
                out[f.name] = torch.empty(0)
        else:
            out[f.name] = list(v)
    return out
