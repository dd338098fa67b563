"""What feedline would give: feedline's equivalent of a torch DataLoader,
measured on a sample of the same files (Doctor(what_if=True), the default).

For a DataLoader over a torchvision ImageFolder (or DatasetFolder of
images, through Subset-like wrappers) whose Compose feedline translates
(feedline.transforms.translate), the doctor builds a temporary ImageFolder
of symlinks to `files` of its images, spread over the list and keeping
their class folders (REPEATS links to each: one epoch long enough to time,
as the user's long epoch is, with the files in the page cache as the
DataLoader left them), runs feedline.Loader on it with the translated
transform and the same batch size for at most `seconds` and records the
rate after its first batches (evidence.WhatIf). Anything it does not know (another dataset class,
a custom image loader or collate_fn, a target_transform, a member of the
Compose with no native equivalent) is not guessed at: the section says why
the what-if did not run. rules/what_if.py turns it into a finding.
"""
from __future__ import annotations

import os
import tempfile
import time
from typing import Any, Callable, Optional, Union

from . import _torch_compat, what_if_lists
from .evidence import WhatIf

DEFAULT_FILES = 200
DEFAULT_SECONDS = 3.0
REPEATS = 5  # links per sampled file: one epoch of files x REPEATS samples, no epoch start-up in the rate
WARMUP_BATCHES = 3  # left out of the rate: start-up, and the batches the ring prepared meanwhile


class NotRunnable(Exception):
    """Why feedline's equivalent cannot be built for this loader (the reason, in words)."""


Found = Union[tuple[Any, list[tuple[str, int]], Any], what_if_lists.ListPlan]


def _recognise(loader: Any, original_transforms: Optional[list[Any]],
               batch_keys: Optional[list[str]] = None) -> Found:
    """(the ImageFolder, the (path, class index) pairs the loader reads, its
    Compose as the user gave it), or the plan for a dataset that declares a
    CSV/JSONL list (what_if_lists.py), or NotRunnable naming what is unknown."""
    from torch.utils.data import Subset
    from torchvision.datasets import DatasetFolder
    from torchvision.datasets.folder import IMG_EXTENSIONS, default_loader, pil_loader

    ds = _torch_compat.user_dataset(loader)
    indices: Optional[list[int]] = None
    chain = list(_torch_compat.dataset_chain(ds))
    for d in chain:
        base: Any = _torch_compat.user_type(d)
        if isinstance(d, Subset) and not isinstance(d, DatasetFolder):
            inner = list(d.indices)  # the outer Subset's indices index this one's
            indices = inner if indices is None else [inner[i] for i in indices]
            continue
        if what_if_lists.declares_list(d):
            return what_if_lists.plan(d, indices, original_transforms, batch_keys, NotRunnable)
        if type(d).__module__.split(".")[0] == "webdataset":
            raise NotRunnable(_webdataset_reason(d, base.__name__))
        if not isinstance(d, DatasetFolder):
            raise NotRunnable(f"a {base.__name__} is a dataset the doctor does not know (it knows torchvision's "
                              "ImageFolder and DatasetFolder of images, also inside a Subset, and datasets that "
                              "declare their CSV/JSONL list by list_path and fields: docs/doctor.md)")
        if base.__getitem__ is not DatasetFolder.__getitem__:
            raise NotRunnable(f"{base.__name__} overrides __getitem__: the doctor cannot know what it returns")
        if d.loader not in (default_loader, pil_loader):
            raise NotRunnable(f"{base.__name__}(loader={_name(d.loader)}) reads images its own way; feedline "
                              "reads and decodes the files itself, so the comparison would not be like for like")
        if d.target_transform is not None:
            raise NotRunnable(f"{base.__name__}(target_transform={_name(d.target_transform)}): feedline.Loader "
                              "gives the class index as the label")
        if d.transform is None:
            raise NotRunnable(f"{base.__name__} has no transform: its samples are PIL images, which feedline "
                              "does not return")
        exts = {os.path.splitext(p)[1].lower() for p, _ in d.samples[:1000]}
        bad = sorted(e for e in exts if e not in IMG_EXTENSIONS)
        if bad:
            raise NotRunnable(f"{base.__name__} holds files that are not images ({', '.join(bad)})")
        samples = list(d.samples) if indices is None else [d.samples[i] for i in indices]
        compose = d.transform
        if original_transforms is not None and hasattr(compose, "transforms"):
            compose = type(compose)(list(original_transforms))  # the entries the probes replaced, as given
        return d, samples, compose
    raise NotRunnable("the DataLoader has no dataset the doctor can see")


def _webdataset_reason(d: Any, name: str) -> str:
    """Why a webdataset pipeline is not reproduced: its shards are known
    (when it lists them), the mapping of its stages to fields is not."""
    shards = None
    for stage in getattr(d, "pipeline", None) or []:
        urls = getattr(stage, "urls", None)
        if isinstance(urls, (list, tuple)) and urls:
            shards = [str(u) for u in urls]
            break
    where = f" over {len(shards)} shard(s) such as {shards[0]!r}" if shards else ""
    return (f"a webdataset {name} pipeline{where}: feedline.Loader reads WebDataset tars itself "
            "(feedline.Loader(shards, fields={...}), docs/fields.md), but the doctor does not read a pipeline's "
            "stages (decode, to_tuple, map_tuple and the rest are user code to it), so it cannot know which "
            "members become which fields, or which transform runs on them")


def _name(obj: Any) -> str:
    return getattr(obj, "__name__", None) or type(obj).__name__


def _symlink_tree(samples: list[tuple[str, int]], classes: list[str], files: int, into: str,
                  repeats: int = 1) -> int:
    """A temporary ImageFolder of symlinks to `files` of `samples`, spread
    evenly over the list, each in its class's folder (`repeats` links to
    each, so that one epoch is long enough to time). Returns how many files."""
    step = max(1, len(samples) // files)
    picked = samples[::step][:files]
    for i, (path, target) in enumerate(picked):
        cls = classes[target] if 0 <= target < len(classes) else f"class_{target}"
        d = os.path.join(into, cls)
        os.makedirs(d, exist_ok=True)
        for k in range(repeats):
            os.symlink(os.path.abspath(path), os.path.join(d, f"{i:06d}_{k}_{os.path.basename(path)}"))
    return len(picked)


def _time(loader: Any, seconds: float) -> tuple[int, Optional[float], Optional[float]]:
    """One epoch of `loader`, timed after its first WARMUP_BATCHES batches
    (fewer when the epoch is short), until `seconds` after the start:
    (samples timed, when the clock started, when the last arrived)."""
    from .torch_loader import count_samples
    done, t_first, t_end = 0, None, None
    skip = min(WARMUP_BATCHES, max(0, len(loader) // 2 - 1))
    start = time.perf_counter()
    for i, batch in enumerate(loader):
        t = time.perf_counter()
        if i == skip:
            t_first = t
        elif i > skip:
            done += count_samples(batch)
            t_end = t
        del batch
        if t - start >= seconds:
            break
    return done, t_first, t_end


def code_change(root: str, batch_size: int, shuffle: bool, drop_last: bool) -> str:
    """The change to make: the Loader call with the user's root, batch size
    and transform (the Compose given to ImageFolder, translated natively)."""
    extra = (", shuffle=True" if shuffle else "") + (", drop_last=True" if drop_last else "")
    return (f"import feedline\n"
            f"loader = feedline.Loader({root!r}, batch_size={batch_size}{extra}, transform=transform)")


def run(loader: Any, original_transforms: Optional[list[Any]] = None, collate_fn: Any = None,
        files: int = DEFAULT_FILES, seconds: float = DEFAULT_SECONDS,
        batch_keys: Optional[list[str]] = None) -> WhatIf:
    """feedline's equivalent of `loader` measured on `files` of its files
    for at most `seconds` (after the first batch). `original_transforms`
    and `collate_fn` are the user's, where the probes replaced them on the
    loader; `batch_keys` the keys of the watched batches when they were
    dicts (a list dataset's must be its declared fields). Never raises for
    a loader it cannot reproduce: the record says why instead."""
    try:
        found = _recognise(loader, original_transforms, batch_keys)
    except NotRunnable as e:
        return WhatIf(ran=False, reason=str(e))
    except ImportError as e:
        return WhatIf(ran=False, reason=f"torchvision is not importable here ({e})")
    if isinstance(found, what_if_lists.ListPlan):
        return _run_list(loader, found, collate_fn, files, seconds)
    ds, samples, compose = found
    from torch.utils.data import RandomSampler

    from .. import transforms as fl_transforms
    from ..loader import Loader
    try:
        translation = fl_transforms.translate(compose)
    except fl_transforms.UnsupportedTransformError as e:
        members = "; ".join(f"{m.member} at position {m.position}: {m.reason}" for m in e.members)
        return WhatIf(ran=False, reason=f"the transform has no native equivalent: {members}",
                      dataset=_torch_compat.user_type(ds).__name__, root=str(ds.root))
    collate = collate_fn if collate_fn is not None else loader.collate_fn
    if not _torch_compat.is_default_collate(collate):
        return WhatIf(ran=False, reason=f"collate_fn={_name(collate)}: feedline.Loader batches with "
                      "its own collate (stacked images, int64 labels), so it would not give the same batches",
                      dataset=_torch_compat.user_type(ds).__name__, root=str(ds.root))
    batch_size = loader.batch_size or 1
    shuffle = isinstance(loader.sampler, RandomSampler)
    notes = []
    if len(samples) != len(ds.samples):
        notes.append(f"the DataLoader reads {len(samples)} of the folder's {len(ds.samples)} images (a Subset); "
                     "feedline.Loader reads the whole folder")
    rec = WhatIf(ran=False, reason=None, dataset=_torch_compat.user_type(ds).__name__, root=str(ds.root),
                 batch_size=batch_size, transform="; ".join(s for _, _, s in translation.members if s),
                 code=code_change(str(ds.root), batch_size, shuffle, bool(loader.drop_last)), notes=notes)
    with tempfile.TemporaryDirectory(prefix="feedline-what-if-") as tmp:
        n = _symlink_tree(samples, list(ds.classes), files, tmp, REPEATS)
        rec.files = n
        # rank 0 of 1: this process's rate, whatever the process group
        return _measure(rec, lambda: Loader(tmp, batch_size=batch_size, transform=compose, shuffle=shuffle,
                                            rank=0, world_size=1), seconds)


def _measure(rec: WhatIf, make: Callable[[], Any], seconds: float) -> WhatIf:
    """Times the loader make() creates (_time) into `rec`: its threads,
    samples and rate, or why it could not (a Loader error is the what-if's
    answer, with its reason). The loader is closed either way."""
    try:
        fl = make()
        try:
            done, t_first, t_end = _time(fl, seconds)
            rec.threads = fl.num_threads
        finally:
            fl.close()
    except Exception as e:  # noqa: BLE001 - reported, not raised
        rec.reason = f"feedline.Loader failed on the sample: {type(e).__name__}: {e}"
        return rec
    if t_first is None or t_end is None or t_end <= t_first or not done:
        rec.reason = "the sample gave too few batches to time (batch size close to the sample's size)"
        return rec
    rec.ran, rec.samples, rec.seconds = True, done, t_end - t_first
    rec.samples_per_s = done / (t_end - t_first)
    return rec


def _run_list(loader: Any, p: what_if_lists.ListPlan, collate_fn: Any, files: int, seconds: float) -> WhatIf:
    """feedline.Loader(list, fields=..., transform=...) on a sample of the
    declared list's rows (what_if_lists.py)."""
    from torch.utils.data import RandomSampler

    from .. import transforms as fl_transforms
    from ..loader import Loader
    name = _torch_compat.user_type(p.dataset).__name__
    rec = WhatIf(ran=False, reason=None, dataset=name, root=p.list_path)
    described = ""
    if p.compose is not None:
        try:
            translation = fl_transforms.translate(p.compose, strict=True)
        except fl_transforms.UnsupportedTransformError as e:
            members = "; ".join(f"{m.member} at position {m.position}: {m.reason}" for m in e.members)
            rec.reason = f"the transform has no native equivalent: {members}"
            return rec
        described = "; ".join(s for _, _, s in translation.members if s)
    collate = collate_fn if collate_fn is not None else loader.collate_fn
    if not _torch_compat.is_default_collate(collate):
        rec.reason = (f"collate_fn={_name(collate)}: feedline.Loader batches fields with its own collate "
                      "(stacked tensors, lists of text), so it would not give the same batches")
        return rec
    batch_size = loader.batch_size or 1
    shuffle = isinstance(loader.sampler, RandomSampler)
    rec.batch_size = batch_size
    rec.transform = described or "no image fields"
    rec.code = what_if_lists.code_change(p, batch_size, shuffle, bool(loader.drop_last))
    with tempfile.TemporaryDirectory(prefix="feedline-what-if-") as tmp:
        try:
            sample, n, read = what_if_lists.sample_list(p, files, tmp, REPEATS)
        except (OSError, ValueError, UnicodeDecodeError) as e:
            rec.reason = f"the list could not be read: {e}"
            return rec
        rec.files = n
        if p.indices is not None:
            rec.notes.append(f"the DataLoader reads {read} of the list's rows (a Subset); feedline.Loader reads "
                             "the whole list")
        return _measure(rec, lambda: Loader(sample, batch_size=batch_size, fields=p.fields, transform=p.compose,
                                            strict=True, shuffle=shuffle, rank=0, world_size=1), seconds)
