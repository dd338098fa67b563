"""Planted costs for the doctor's live scenarios, shared by
tests/python/test_doctor_scenarios.py and bench/e2e/doctor_bench.py (module
level: DataLoader worker processes must be able to pickle them); and what
the doctor's report tests share (tests/python/test_doctor_*.py): one real
report as a fixture, the documented-fields parser, a fake CUDA event."""
import pathlib
import re
import time

import torch
import torchvision.transforms as T
from torch.utils.data import DataLoader, default_collate
from torchvision.datasets import ImageFolder
from torchvision.datasets.folder import pil_loader

ROOT = pathlib.Path(__file__).resolve().parents[2]


class Sleep:
    def __init__(self, seconds):
        self.seconds = seconds

    def __call__(self, x):
        time.sleep(self.seconds)
        return x


class SlowAugment(Sleep):
    pass


class ColorJitterish(Sleep):
    pass


class Blurish(Sleep):
    pass


class SlowStorage:
    """An ImageFolder loader whose reads take `delay` seconds (remote storage)."""

    def __init__(self, delay):
        self.delay = delay

    def __call__(self, path):
        time.sleep(self.delay)
        return pil_loader(path)


class SlowCollate(Sleep):
    def __call__(self, samples):
        time.sleep(self.seconds)
        return default_collate(samples)


class SetUpConnection(Sleep):
    """worker_init_fn doing per-worker set-up (opening a database, say)."""

    def __call__(self, worker_id):
        time.sleep(self.seconds)


def tf(*extra):
    return T.Compose([T.Resize(64), T.CenterCrop(64), *extra, T.ToTensor()])


# -- shared by the doctor's report tests ---------------------------------------------------------
def report_loader(root, **kwargs):
    ds = ImageFolder(root, transform=T.Compose([T.Resize(64), T.CenterCrop(64), SlowAugment(0.004),
                                                T.ToTensor()]))
    kwargs.setdefault("batch_size", 8)
    kwargs.setdefault("num_workers", 2)
    return DataLoader(torch.utils.data.Subset(ds, range(96)), **kwargs)


# Free-form objects: documented as such, their keys are not a schema.
FREE_FORM = {"loader.settings", "findings.evidence", "feedline.ring", "pipeline.summary.efficiency"}


def documented_paths():
    """The dotted field paths docs/doctor.md's JSON schema section names:
    "Top level: `a`, ..." and one bullet per section, "- `sec`: `f`, `g`
    (`child`, ...), `h` and `i` (children of both)". A name followed by a
    parenthesis has the backticked names inside it as children; names joined
    by " and " share them."""
    doc = (ROOT / "docs" / "doctor.md").read_text()
    section = doc[doc.index("## JSON schema"):]
    section = section[:section.index("\n## ", 3)]
    entries = re.findall(r"^(?:Top level:|- `(\w+)`[^:`\n]*:)(.*?)(?=^- `|^\n|\Z)", section, re.M | re.S)
    assert len(entries) > 10, "the schema section's layout changed: fix documented_paths()"
    paths = set()
    for root, body in entries:
        stack, run, prev_end = [[root] if root else [""]], [], 0
        for m in re.finditer(r"`([^`]+)`|[()]", body):
            between = body[prev_end:m.start()]
            prev_end = m.end()
            if m.group(0) == "(":
                stack.append(run or [None])
                run = []
            elif m.group(0) == ")":
                if len(stack) > 1:
                    stack.pop()
                run = []
            else:
                run = run + [m.group(1)] if run and between == " and " else [m.group(1)]
                prefixes = [""]
                for level in stack:
                    names = [n for n in level if n]
                    if names:
                        prefixes = [f"{p}.{n}" if p else n for p in prefixes for n in names]
                paths.update(f"{p}.{m.group(1)}" if p else m.group(1) for p in prefixes)
    return paths


def report_paths(obj, prefix=""):
    """Every dotted field path of a report; a list of objects contributes
    its elements' fields under the list's own path."""
    items = obj.items() if isinstance(obj, dict) else ()
    for k, v in items:
        path = f"{prefix}.{k}" if prefix else k
        yield path
        if path in FREE_FORM:
            continue
        if isinstance(v, dict):
            yield from report_paths(v, path)
        elif isinstance(v, list):
            for e in v:
                yield from report_paths(e, path)


def undocumented(data):
    doc = documented_paths()
    return sorted({p for p in report_paths(data) if p not in doc})


class FakeEvent:
    """Stands in for torch.cuda.Event: a time on the device's clock, in s."""

    def __init__(self, t=0.0):
        self.t = t

    def record(self):
        pass

    def synchronize(self):
        pass

    def elapsed_time(self, other):  # milliseconds, like CUDA events
        return (other.t - self.t) * 1e3
