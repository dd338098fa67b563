"""What a loop gets under feedline.doctor.watch is what it gets without it,
bit for bit, on every torch the doctor supports (python/feedline/doctor/
_torch_compat.py): map-style datasets, __getitems__, IterableDataset,
IterDataPipe, persistent workers over two epochs, pin_memory, and torchdata's
StatefulDataLoader with a state_dict() resume under watch; and when one of
torch's internals is not as the probes expect, the doctor times the loop from
outside, says so in the report, and the batches are still the same.

Runs under Debian's torch 1.13 and pip's torch 2.14 (`pytest tests/python` under
each interpreter); what a version lacks (torchvision's v2 transforms,
torchdata) is skipped by name."""
import math

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

import feedline
from feedline.doctor import _torch_compat, probes

WORKERS = [0, 2]


# -- datasets: each draws random numbers where torch seeds them (per worker) ------------------------
def _augment():
    """A random crop and flip: torchvision's v2 on uint8 tensors where it exists, else v1."""
    try:
        from torchvision.transforms import v2 as T
    except ImportError:
        import torchvision.transforms as T
    return T.Compose([T.RandomCrop(6), T.RandomHorizontalFlip()])


class Images(Dataset):
    """A map-style dataset: a uint8 image per index, a random crop and flip,
    and a random float (torch's RNG, seeded per worker)."""

    def __init__(self, n=40, transform=None):
        self.n, self.transform = n, transform

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        img = torch.randint(0, 256, (3, 8, 8), dtype=torch.uint8, generator=g)
        if self.transform is not None:
            img = self.transform(img)
        return img, i, torch.rand(2)


class BatchedImages(Images):
    """Loads a whole batch at once (torch calls __getitems__ where it knows it)."""

    def __getitems__(self, indices):
        return [(self[i][0], i * 10, torch.rand(3)) for i in indices]


class Stream(IterableDataset):
    """torch's documented IterableDataset: each worker takes its share of the range."""

    def __init__(self, n=37):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        per = int(math.ceil(self.n / (info.num_workers if info else 1)))
        start = (info.id if info else 0) * per
        for i in range(start, min(start + per, self.n)):
            yield torch.tensor([i]), torch.rand(4)


class CountingIterator:
    """An iterator with state_dict / load_state_dict (torchdata's Stateful):
    items after a load carry a 1, so a resume that fast-forwards instead of
    loading the state shows in the batches."""

    def __init__(self, start, stop):
        self.i, self.stop, self.loaded = start, stop, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= self.stop:
            raise StopIteration
        self.i += 1
        return torch.tensor([self.i - 1, self.loaded])

    def state_dict(self):
        return {"i": self.i}

    def load_state_dict(self, state):
        self.i, self.loaded = state["i"], 1


class StatefulStream(IterableDataset):
    def __init__(self, n=48):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        k, w = (info.id, info.num_workers) if info else (0, 1)
        per = self.n // w
        return CountingIterator(k * per, (k + 1) * per)


# -- running a loop, watched or not, and comparing what it got -----------------------------------------
def _run(make_loader, watched, epochs=1, stop_after=None):
    """The batches a loop receives, the report when watched, the loader, and
    (with stop_after) its state_dict() taken inside the loop right after
    that many batches, mid-epoch, before breaking out. The global RNG is
    reset first: the loader's base seed comes from it."""
    torch.manual_seed(1234)
    loader = make_loader()
    got, report, state = [], None, None
    doctor = feedline.doctor.Doctor() if watched else None
    for _ in range(epochs):
        for batch in (doctor.watch(loader) if watched else loader):
            got.append(batch)
            if stop_after is not None and len(got) == stop_after:
                state = loader.state_dict()
                break
    if watched:
        report = doctor.report(file=None)
        doctor.detach()
    return got, report, loader, state


def _flatten(batch, path="batch"):
    if isinstance(batch, torch.Tensor):
        yield path, batch
    elif isinstance(batch, (list, tuple)):
        assert type(batch) in (list, tuple), f"{path}: {type(batch).__name__}"
        for i, b in enumerate(batch):
            yield from _flatten(b, f"{path}[{i}]")
    elif isinstance(batch, dict):
        for k in sorted(batch):
            yield from _flatten(batch[k], f"{path}[{k!r}]")
    else:
        yield path, batch


def assert_identical(plain, watched):
    """Same count, same order, same structure and types, every tensor the
    same dtype, shape, pinning and bytes."""
    assert len(plain) > 0 and len(plain) == len(watched)
    for n, (a, b) in enumerate(zip(plain, watched)):
        assert type(a) is type(b), f"batch {n}: {type(a).__name__} != {type(b).__name__}"
        fa, fb = list(_flatten(a)), list(_flatten(b))
        assert [p for p, _ in fa] == [p for p, _ in fb], f"batch {n}: structure"
        for (path, x), (_, y) in zip(fa, fb):
            assert type(x) is type(y), f"batch {n} {path}: {type(x).__name__} != {type(y).__name__}"
            if isinstance(x, torch.Tensor):
                assert x.dtype == y.dtype and x.shape == y.shape, f"batch {n} {path}"
                assert x.is_pinned() == y.is_pinned(), f"batch {n} {path}: pinning"
                assert x.contiguous().numpy().tobytes() == y.contiguous().numpy().tobytes(), f"batch {n} {path}"
            else:
                assert x == y, f"batch {n} {path}"


def _probed(report, samples):
    """The probes attached and timed every sample."""
    assert report.data["probes"]["mode"] == "probes" and report.data["probes"]["not_attached"] == []
    assert report.data["torch"]["samples_timed"] == samples
    assert not any(f["id"] == "probes_not_attached" for f in report.findings)
    feedline.doctor.validate(report.data)


def _gen():
    return torch.Generator().manual_seed(7)


# -- the loops --------------------------------------------------------------------------------------
@pytest.mark.parametrize("num_workers", WORKERS)
def test_map_style_dataset_batches_are_identical(num_workers):
    compose = _augment()
    entries = list(compose.transforms)

    def make():
        return DataLoader(Images(transform=compose), batch_size=8, shuffle=True, num_workers=num_workers,
                          generator=_gen())
    plain, *_ = _run(make, False)
    watched, report, loader, _ = _run(make, True)
    assert_identical(plain, watched)
    _probed(report, 40)
    assert [t["index"] for t in report.data["torch"]["transforms"]] == [0, 1]  # the Compose's entries, timed
    assert type(loader.dataset) is Images and compose.transforms == entries  # and all put back


@pytest.mark.parametrize("num_workers", WORKERS)
def test_getitems_dataset_batches_are_identical(num_workers):
    def make():
        return DataLoader(BatchedImages(), batch_size=8, shuffle=True, num_workers=num_workers, generator=_gen())
    plain, *_ = _run(make, False)
    watched, report, *_ = _run(make, True)
    assert_identical(plain, watched)
    # torch called __getitems__ (labels i * 10) in both runs, as it does without the doctor.
    labels = sorted(int(i) for b in watched for i in b[1])
    assert labels == [10 * i for i in range(40)]
    _probed(report, 40)


@pytest.mark.parametrize("num_workers", WORKERS)
def test_iterable_dataset_batches_are_identical(num_workers):
    def make():
        return DataLoader(Stream(), batch_size=5, num_workers=num_workers, generator=_gen())
    plain, *_ = _run(make, False)
    watched, report, *_ = _run(make, True)
    assert_identical(plain, watched)
    assert sorted(int(i) for b in watched for i in b[0]) == list(range(37))
    _probed(report, 37)


@pytest.mark.parametrize("num_workers", WORKERS)
def test_iter_datapipe_keeps_its_shuffle_seed_and_sharding(num_workers):
    """DataLoader seeds an IterDataPipe's shuffle (and shards it per worker)
    only when isinstance(dataset, IterDataPipe): a wrapper that hides the
    type gives other orders, and every item once per worker."""
    datapipes = pytest.importorskip("torch.utils.data.datapipes.iter")

    def make():
        dp = datapipes.IterableWrapper(range(64)).shuffle().sharding_filter()
        return DataLoader(dp, batch_size=8, num_workers=num_workers, generator=_gen())
    plain, *_ = _run(make, False)
    watched, report, *_ = _run(make, True)
    assert_identical(plain, watched)
    assert sorted(int(i) for b in watched for i in b) == list(range(64))
    _probed(report, 64)


@pytest.mark.parametrize("num_workers", [2])
def test_persistent_workers_two_epochs_are_identical(num_workers):
    def make():
        return DataLoader(Images(transform=_augment()), batch_size=8, shuffle=True, num_workers=num_workers,
                          persistent_workers=True, generator=_gen())
    plain, *_ = _run(make, False, epochs=2)
    watched, report, *_ = _run(make, True, epochs=2)
    assert_identical(plain, watched)
    assert len(watched) == 10
    _probed(report, 80)


@pytest.mark.parametrize("num_workers", WORKERS)
def test_pin_memory_batches_are_identical(num_workers):
    """On a machine with CUDA the batches are pinned, by torch, in both
    runs and the pin is timed; without one torch skips pinning (and says
    so) in both."""
    def make():
        return DataLoader(Images(), batch_size=8, shuffle=True, num_workers=num_workers, pin_memory=True,
                          generator=_gen())
    plain, *_ = _run(make, False)
    watched, report, *_ = _run(make, True)
    assert_identical(plain, watched)
    _probed(report, 40)
    assert "pin_memory" in report.data["probes"]["attached"]
    if torch.cuda.is_available():
        assert all(t.is_pinned() for b in watched for t in b if isinstance(t, torch.Tensor))
        assert report.data["torch"]["batch"]["pin_s"] is not None


# -- torchdata's StatefulDataLoader ---------------------------------------------------------------------
def _stateful():
    return pytest.importorskip("torchdata.stateful_dataloader").StatefulDataLoader


def _resume(make_loader, watched, stop_after):
    """Stops after `stop_after` batches with state_dict(), and resumes in a
    new loader (watched in a new Doctor when `watched`): (batches before,
    batches after, the resumed run's report)."""
    first, _, _, state = _run(make_loader, watched, stop_after=stop_after)
    torch.manual_seed(99)  # the resumed run must not depend on the global RNG
    resumed = make_loader()
    resumed.load_state_dict(state)
    report = None
    if watched:
        w = feedline.doctor.watch(resumed)
        rest = list(w)
        report = w.report(file=None)
    else:
        rest = list(resumed)
    return first, rest, report


@pytest.mark.parametrize("num_workers", WORKERS)
def test_stateful_dataloader_batches_and_resume_are_identical(num_workers):
    StatefulDataLoader = _stateful()

    def make():
        return StatefulDataLoader(Images(transform=_augment()), batch_size=4, shuffle=True,
                                  num_workers=num_workers, generator=_gen())
    plain, *_ = _run(make, False)
    watched, report, *_ = _run(make, True)
    assert_identical(plain, watched)
    _probed(report, 40)

    first_plain, rest_plain, _ = _resume(make, False, stop_after=4)
    first_watched, rest_watched, report = _resume(make, True, stop_after=4)
    assert_identical(first_plain, first_watched)
    assert_identical(rest_plain, rest_watched)
    assert len(rest_watched) == 10 - 4
    # The resumed run picks up where the first stopped: the indices are the uninterrupted epoch's.
    assert [int(i) for b in rest_watched for i in b[1]] == [int(i) for b in plain[4:] for i in b[1]]
    _probed(report, 24)


@pytest.mark.parametrize("num_workers", WORKERS)
def test_stateful_dataloader_resumes_an_iterable_from_its_iterators_state(num_workers):
    """The dataset's iterator has state_dict / load_state_dict: torchdata
    loads its state on resume (items carry a 1) rather than fast-forwarding,
    under watch as without."""
    StatefulDataLoader = _stateful()

    def make():
        return StatefulDataLoader(StatefulStream(), batch_size=4, num_workers=num_workers)
    plain, *_ = _run(make, False)
    watched, report, *_ = _run(make, True)
    assert_identical(plain, watched)
    _probed(report, 48)
    _, rest_plain, _ = _resume(make, False, stop_after=3)
    _, rest_watched, report = _resume(make, True, stop_after=3)
    assert_identical(rest_plain, rest_watched)
    assert all(int(x[1]) == 1 for b in rest_watched for x in b)  # loaded, not fast-forwarded
    assert report.data["probes"]["mode"] == "probes"


# -- a broken assumption: timed from outside, said so, batches the same ------------------------------
def _outside(report, part):
    p = report.data["probes"]
    assert p["mode"] == "outside" and p["attached"] == []
    assert [n["part"] for n in p["not_attached"]] == [part]
    assert report.data["torch"] is None  # no per-stage evidence: nothing was installed
    f = next(f for f in report.findings if f["id"] == "probes_not_attached")
    assert "outside" in f["title"] and p["not_attached"][0]["reason"] in f["summary"]
    loop = report.data["loop"]
    assert loop["steps"] > 0 and loop["wait_s"] > 0  # the loop itself was still timed
    feedline.doctor.validate(report.data)
    assert "probes_not_attached" in [g["id"] for g in
                                     feedline.doctor.Report.from_json(report.data, rediagnose=True).findings]
    return f


@pytest.mark.parametrize("num_workers", WORKERS)
@pytest.mark.parametrize("breakage", ["stops delegating", "gone"])
def test_a_pin_function_not_as_expected_makes_the_doctor_time_from_outside(monkeypatch, num_workers, breakage):
    """A torch whose pin function returns objects it does not know as they
    are (a ProbedBatch would reach the loop unpinned), or has none by that
    name: the doctor checks this when it attaches, installs nothing, and
    says so."""
    from torch.utils.data._utils import pin_memory as pin_module
    original = pin_module.pin_memory
    if breakage == "gone":
        if torch.cuda.is_available():
            pytest.skip("torch's own pin-memory thread needs the function it would lack")
        monkeypatch.delattr(pin_module, "pin_memory")
    else:
        def pin_memory(data, device=None):
            if isinstance(data, probes.ProbedBatch):
                return data
            return original(data, device)
        monkeypatch.setattr(pin_module, "pin_memory", pin_memory)
    monkeypatch.setattr(_torch_compat, "_pin", None)

    def make():
        return DataLoader(Images(), batch_size=8, shuffle=True, num_workers=num_workers, pin_memory=True,
                          generator=_gen())
    plain, *_ = _run(make, False)
    watched, report, loader, _ = _run(make, True)
    assert_identical(plain, watched)
    f = _outside(report, "pin_memory")
    assert ("pin_memory()" if breakage != "gone" else "is gone") in f["summary"]
    assert type(loader.dataset) is Images and loader.collate_fn is torch.utils.data.default_collate


def test_an_unknown_torch_version_makes_the_doctor_time_from_outside(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "3.0.0")

    def make():
        return DataLoader(Images(), batch_size=8, shuffle=True, num_workers=2, generator=_gen())
    plain, *_ = _run(make, False)
    watched, report, *_ = _run(make, True)
    assert_identical(plain, watched)
    f = _outside(report, "torch")
    assert "3.0.0" in f["summary"]


def test_persistent_workers_started_before_the_watch_are_not_restarted():
    """Restarting them would reseed their RNG (a different augmentation than
    without the doctor): the doctor times that loop from outside instead."""
    def make():
        return DataLoader(Images(transform=_augment()), batch_size=8, shuffle=True, num_workers=2,
                          persistent_workers=True, generator=_gen())

    def two_epochs(watched):
        torch.manual_seed(1234)
        loader = make()
        got = list(loader)  # epoch 1, unwatched: the workers start
        it = loader._iterator
        report = None
        if watched:
            w = feedline.doctor.watch(loader)
            got += list(w)
            assert loader._iterator is it
            report = w.report(file=None)
        else:
            got += list(loader)
        return got, report
    plain, _ = two_epochs(False)
    watched, report = two_epochs(True)
    assert_identical(plain, watched)
    assert "reseed" in _outside(report, "persistent workers")["summary"]


def test_a_dataset_that_is_not_a_torch_dataset_is_timed_through_a_wrapper():
    """A plain list: torch only indexes it, so a forwarding wrapper stands in on the loader."""
    data = [torch.full((3,), float(i)) for i in range(16)]

    def make():
        return DataLoader(data, batch_size=4, shuffle=True, num_workers=2, generator=_gen())
    plain, *_ = _run(make, False)
    watched, report, loader, _ = _run(make, True)
    assert_identical(plain, watched)
    _probed(report, 16)
    assert "dataset (wrapper)" in report.data["probes"]["attached"] and loader.dataset is data


# -- the timed dataset is the user's, in every way torch or pickle can look ----------------------------
class Slotted(Dataset):
    __slots__ = ("n",)

    def __init__(self, n=6):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.tensor([i])


class Reducing(Slotted):
    __slots__ = ()

    def __reduce__(self):  # rebuilt from its arguments, by its own class
        return self.__class__, (self.n,)


@pytest.mark.parametrize("make", [Slotted, Reducing, lambda: torch.utils.data.Subset(Slotted(), [3, 1]),
                                  lambda: torch.utils.data.TensorDataset(torch.arange(4))])
def test_a_timed_dataset_pickles_and_copies_as_its_own_class(make):
    import copy
    import pickle
    ds = make()
    base = type(ds)
    loader = DataLoader(ds, batch_size=2)
    att = _torch_compat.Attachment(loader)
    assert att.attach(), att.outside
    assert loader.dataset is ds and probes.is_timed(ds) and isinstance(ds, base)
    assert type(ds).__name__ == base.__name__ and type(ds).__module__ == base.__module__
    items = [ds[i] for i in range(len(ds))]
    for other in (pickle.loads(pickle.dumps(ds)), copy.deepcopy(ds), copy.copy(ds)):
        assert probes.is_timed(other) and _torch_compat.user_type(other) is base
        assert_identical(items, [other[i] for i in range(len(other))])
    # Iterated directly while attached, the loader yields ProbedBatch: the batches inside are the same.
    assert_identical([b.data for b in loader], list(DataLoader(make(), batch_size=2)))
    att.detach()
    assert type(ds) is base and pickle.loads(pickle.dumps(ds)).__class__ is base
