"""What feedline would give, for a DataLoader over a CSV / JSON Lines list
of named fields (docs/fields.md; docs/doctor.md "What feedline would give").

The doctor cannot know what a user's Dataset makes of a list's rows, so it
only runs the what-if for a dataset that says so, by a documented protocol:
a map-style Dataset (or one a Subset-like wrapper holds) with

    list_path  the .csv or .jsonl list it reads, item i being row i;
    fields     the mapping feedline.Loader(list_path, fields=...) takes,
               under which each item is that field dict ({"image": tensor,
               "caption": str, ...}: what the Loader gives for the row);
    transform  the torchvision Compose applied to its image fields (needed
               when there are image fields; ignored otherwise).

Declaring them is the dataset's statement that feedline.Loader(list_path,
fields=fields, transform=transform) gives the same samples. The doctor still
checks what it can: the list exists and is a list feedline reads, the
fields parse, the watched batches are dicts of exactly those fields, the
collate_fn is the default and the transform translates; anything else is a
reason, never a guess. The sample is a temporary list of `files` of the
rows, spread over the list (REPEATS copies, so that one epoch is long
enough to time), with the file columns made absolute so that the copy
reads the same files.
"""
from __future__ import annotations

import csv
import json
import os
from collections.abc import Mapping
from typing import Any, Optional

LIST_EXTENSIONS = (".csv", ".jsonl")
FILE_KINDS = ("image", "ndarray", "bytes")  # fields whose columns hold paths (as feedline.Loader reads them)


class ListPlan:
    """A recognised list dataset: what the what-if runs."""

    def __init__(self, dataset: Any, list_path: str, fields: dict[str, Any], parsed: list[Any], compose: Any,
                 indices: Optional[list[int]]) -> None:
        self.dataset, self.list_path, self.fields, self.parsed = dataset, list_path, fields, parsed
        self.compose, self.indices = compose, indices

    @property
    def image_fields(self) -> list[str]:
        return [f.name for f in self.parsed if f.kind == "image"]


def declares_list(ds: Any) -> bool:
    """The dataset takes part in the protocol (both attributes present)."""
    return hasattr(ds, "list_path") and hasattr(ds, "fields")


def plan(ds: Any, indices: Optional[list[int]], original_transforms: Optional[list[Any]],
         batch_keys: Optional[list[str]], not_runnable: type[Exception]) -> ListPlan:
    """The plan for a dataset that declares a list, or `not_runnable` naming
    what does not hold."""
    from .. import _fields
    from . import _torch_compat
    name = _torch_compat.user_type(ds).__name__
    raw = ds.list_path
    if not isinstance(raw, (str, os.PathLike)):
        raise not_runnable(f"{name}.list_path is a {type(raw).__name__}, not a path")
    path = os.path.abspath(os.fsdecode(os.fspath(raw)))
    if not path.lower().endswith(LIST_EXTENSIONS):
        raise not_runnable(f"{name}.list_path {path!r} is not a .csv or .jsonl list (feedline reads those)")
    if not os.path.isfile(path):
        raise not_runnable(f"{name}.list_path {path!r} is not a file")
    if not isinstance(ds.fields, Mapping):
        raise not_runnable(f"{name}.fields is a {type(ds.fields).__name__}, not the mapping feedline.Loader's "
                           "fields= takes (docs/fields.md)")
    fields = dict(ds.fields)
    try:
        parsed = _fields.parse(fields)
    except (ValueError, TypeError) as e:
        raise not_runnable(f"{name}.fields is not a fields= mapping feedline.Loader takes: {e}") from e
    names = sorted(f.name for f in parsed)
    if batch_keys is None:
        raise not_runnable(f"the watched batches are not dicts, while {name}.fields declares the fields {names}")
    if sorted(batch_keys) != names:
        raise not_runnable(f"the watched batches have the keys {sorted(batch_keys)}, while {name}.fields declares "
                           f"{names}: its items are not what feedline.Loader would give")
    compose = None
    if any(f.kind == "image" for f in parsed):
        compose = getattr(ds, "transform", None)
        if compose is None:
            raise not_runnable(f"{name} has no transform for its image fields: its images are not tensors "
                               "feedline would give")
        if original_transforms is not None and hasattr(compose, "transforms"):
            compose = type(compose)(list(original_transforms))  # the entries the probes replaced, as given
    return ListPlan(ds, path, fields, parsed, compose, indices)


def _read_rows(path: str) -> tuple[list[dict[str, Any]], Optional[list[str]]]:
    """The list's rows (and a CSV's header), as feedline reads them."""
    if path.lower().endswith(".csv"):
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            return list(reader), list(reader.fieldnames or [])
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}: line {n}: not JSON ({e})") from e
    return rows, None


def sample_list(p: ListPlan, files: int, into: str, repeats: int) -> tuple[str, int, int]:
    """A list in `into` of `files` of the rows (of the Subset's rows where
    there is one), spread evenly, each `repeats` times, with file columns
    made absolute. Returns (its path, rows sampled, rows read)."""
    rows, header = _read_rows(p.list_path)
    read = rows if p.indices is None else [rows[i] for i in p.indices if 0 <= i < len(rows)]
    step = max(1, len(read) // max(1, files))
    picked = read[::step][:files]
    base = os.path.dirname(p.list_path)
    columns = {part for f in p.parsed if f.kind in FILE_KINDS for part in f.parts}
    out_rows = []
    for row in picked:
        row = dict(row)
        for c in columns:
            v = row.get(c)
            if isinstance(v, str) and v and not os.path.isabs(v):
                row[c] = os.path.join(base, v)
        out_rows.append(row)
    out = os.path.join(into, "sample" + os.path.splitext(p.list_path)[1].lower())
    if header is not None:
        with open(out, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=header)
            w.writeheader()
            for _ in range(repeats):
                w.writerows(out_rows)
    else:
        with open(out, "w", encoding="utf-8") as f:
            for _ in range(repeats):
                for row in out_rows:
                    f.write(json.dumps(row) + "\n")
    return out, len(picked), len(read)


def code_change(p: ListPlan, batch_size: int, shuffle: bool, drop_last: bool) -> str:
    """The Loader call with the user's list, batch size, fields (and the
    transform given to the dataset, where there are image fields)."""
    extra = (", shuffle=True" if shuffle else "") + (", drop_last=True" if drop_last else "")
    tf = ", transform=transform" if p.image_fields else ""
    return (f"import feedline\n"
            f"loader = feedline.Loader({p.list_path!r}, batch_size={batch_size}{extra}, fields={p.fields!r}{tf})")
