"""feedline.doctor's probes (probes.py, _torch_compat.py, torch_loader.py): they
stand in faithfully for the user's dataset, transforms and collate_fn, and
count what they time."""
import math
import pickle
import time

import torch
import torchvision.transforms as T
from torch.utils.data import DataLoader, default_collate
from torchvision.datasets import ImageFolder

import feedline
from feedline.doctor import probes, rules

from doctor_plants import report_loader as _loader  # noqa: F401 (fixtures)

# -- the probes carry their timings inside the batch ---------------------------------------------

def test_a_batch_that_escapes_the_doctor_still_unpacks(small_images):
    loader = _loader(small_images, num_workers=0)
    with feedline.doctor.Doctor() as doctor:
        doctor.watch(loader)
        raw = next(iter(loader))  # iterating the loader itself while attached
        images, labels = raw
        assert images.shape == (8, 3, 64, 64) and raw[1] is labels and len(raw) == 2

def test_probes_pickle_for_spawned_workers(small_images):
    ds = ImageFolder(small_images, transform=T.Compose([T.CenterCrop(64), T.ToTensor()]))
    object.__setattr__(ds, "__class__", probes.timed_class(ImageFolder))  # as the doctor times it
    wrapped = pickle.loads(pickle.dumps(ds))
    assert type(wrapped) is type(ds) and isinstance(wrapped, ImageFolder) and probes.is_timed(wrapped)
    assert len(wrapped) == len(ds) and wrapped[0][0].shape == (3, 64, 64)
    assert vars(wrapped).keys() == vars(ds).keys() and wrapped.samples == ds.samples
    tf = pickle.loads(pickle.dumps(probes.TimedTransform(T.CenterCrop(8), 0)))
    collate = pickle.loads(pickle.dumps(probes.TimedCollate(default_collate, True)))
    batch = collate([tf(ds[i][0]) for i in range(2)])
    assert isinstance(batch, probes.ProbedBatch) and batch.data.shape == (2, 3, 8, 8)
    back = pickle.loads(pickle.dumps(batch))
    assert torch.equal(back.data, batch.data) and back.info["samples"] == batch.info["samples"]

# -- the probes stand in faithfully for the user's objects ------------------------------------
class Range(torch.utils.data.IterableDataset):
    """torch's documented IterableDataset example."""

    def __init__(self, start, end, transform=None):
        self.start, self.end, self.transform = start, end, transform

    def __iter__(self):
        for i in range(self.start, self.end):
            yield self.transform(i) if self.transform else i


def split_range(worker_id):
    """torch's documented worker_init_fn: each worker takes its share of the range."""
    info = torch.utils.data.get_worker_info()
    ds = info.dataset
    overall_start, overall_end = ds.start, ds.end
    per = int(math.ceil((overall_end - overall_start) / float(info.num_workers)))
    ds.start = overall_start + info.id * per
    ds.end = min(ds.start + per, overall_end)


def test_attribute_writes_reach_the_users_dataset_so_workers_split_an_iterable():
    loader = DataLoader(Range(0, 8), num_workers=2, worker_init_fn=split_range, batch_size=None)
    assert sorted(int(x) for x in loader) == list(range(8))
    doctor = feedline.doctor.Doctor()
    assert sorted(int(x) for x in doctor.watch(loader)) == list(range(8))  # each item once, not once per worker
    r = doctor.report(file=None)
    doctor.detach()
    assert r.data["loop"]["samples"] == 8 and r.data["torch"]["samples_timed"] == 8
    # The doctor times the user's own object (its class swapped in place), so
    # every write lands on it; a dataset that is not a torch Dataset gets a
    # wrapper that keeps only its own attribute and forwards the rest.
    ds = Range(0, 4)
    object.__setattr__(ds, "__class__", probes.timed_class(Range))
    assert sorted(pickle.loads(pickle.dumps(ds))) == [0, 1, 2, 3] and isinstance(ds, Range)

    class Plain:
        start = 0

        def __getitem__(self, i):
            return i
    plain = Plain()
    w = probes.TimedContainer(plain)
    w.start = 2
    assert plain.start == 2 and "start" not in vars(w) and w.start == 2
    del w.start
    assert plain.start == 0 and "start" not in vars(plain)


class Squares(torch.utils.data.Dataset):
    def __init__(self, n=32):
        self.n, self.batched_calls = n, 0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(0.001)
        return torch.full((3,), float(i * i))


class BatchedSquares(Squares):
    """A dataset that loads a whole batch at once (like torch's Subset from
    2.1, or Hugging Face datasets)."""

    def __getitems__(self, indices):
        self.batched_calls += 1
        time.sleep(0.004)
        return [torch.full((3,), float(i * i)) for i in indices]


def _fresh_records():
    r = probes.records()
    r.samples, r.transforms = [], []
    return r


def test_getitems_is_timed_per_sample_and_only_offered_when_the_dataset_has_it():
    assert not hasattr(probes.timed_class(Squares), "__getitems__")
    ds = BatchedSquares()
    w = BatchedSquares()
    object.__setattr__(w, "__class__", probes.timed_class(BatchedSquares))
    assert hasattr(w, "__getitems__") and isinstance(w, BatchedSquares) and len(w) == 32
    w = pickle.loads(pickle.dumps(w))
    assert hasattr(w, "__getitems__") and probes.is_timed(w)
    r = _fresh_records()
    out = w.__getitems__([0, 1, 2, 3])
    assert [int(x[0]) for x in out] == [0, 1, 4, 9]
    assert [s[4] for s in r.samples] == [0, 1, 2, 3]  # one record per sample, with its index
    assert sum(s[1] for s in r.samples) >= 0.004 and r.samples[1][0] > r.samples[0][0]
    _fresh_records()

    # Through a DataLoader: torch's fetcher calls __getitems__ where it knows
    # it, else __getitem__ per sample; either way every sample is timed.
    loader = DataLoader(ds, batch_size=8, num_workers=0)
    with feedline.doctor.Doctor() as doctor:
        for _ in doctor.watch(loader):
            pass
        t = doctor.report(file=None).data["torch"]
    assert t["samples_timed"] == 32 and t["samples_per_batch"] == 8
    per_sample = 0.004 / 8 if ds.batched_calls else 0.001
    assert t["sample"]["wall_s"] >= 0.9 * per_sample


def test_a_batched_index_counts_every_sample_it_loads():
    class Rows(Squares):
        def __getitem__(self, indices):  # a batched-index sampler hands over a list
            return torch.stack([torch.full((3,), float(i)) for i in indices])

    sampler = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(range(64)), 8, False)
    loader = DataLoader(Rows(64), batch_size=None, sampler=sampler)
    with feedline.doctor.Doctor() as doctor:
        for _ in doctor.watch(loader):
            pass
        data = doctor.report(file=None).data
    assert data["loop"]["samples"] == 64 and data["torch"]["samples_timed"] == 64
    assert data["torch"]["samples_per_batch"] == 8


class Chunks(torch.utils.data.IterableDataset):
    """Yields ready-made batches of 16 rows (the batching done in the dataset)."""

    def __iter__(self):
        for i in range(6):
            time.sleep(0.008)
            yield torch.full((16, 3), float(i))


def test_samples_are_counted_in_the_batch_and_the_torch_evidence_uses_the_same_unit():
    with feedline.doctor.Doctor() as doctor:
        for _ in doctor.watch(DataLoader(Chunks(), batch_size=None)):
            pass
        data = doctor.report(file=None).data
    t = data["torch"]
    assert data["loop"]["samples"] == 96 and t["samples_timed"] == 6  # 6 dataset calls, 96 samples
    assert t["samples_per_batch"] == 16
    # Per sample, not per call: the 96 samples' times fit in the loop's wall
    # time (num_workers=0: every call ran inside it); per call they would be
    # 16 times that.
    assert t["sample"]["wall_s"] >= 0.008 / 16
    assert t["sample"]["wall_s"] * 96 <= data["loop"]["wall_s"]
    # The model's rate is in the loop's unit (samples), not in dataset calls
    # (which would be 16 times lower than the loop it was measured on).
    assert rules.TorchModel(data).B == 16
    assert data["capacity"]["model_samples_per_s"] > 0.3 * data["loop"]["samples_per_s"]


class AddOne:
    def __call__(self, x):
        return x + 1


class Compose:  # torchvision's, minus the import
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class WithTransform(torch.utils.data.Dataset):
    def __init__(self, n, transform):
        self.n, self.transform = n, transform

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.transform(torch.zeros(3))


def test_a_compose_shared_with_another_loader_is_timed_only_for_the_watched_one():
    shared = Compose([AddOne()])
    train = DataLoader(WithTransform(16, shared), batch_size=8)
    val = DataLoader(WithTransform(400, shared), batch_size=100)
    _fresh_records()
    with feedline.doctor.Doctor() as doctor:
        for _ in doctor.watch(train):
            for _ in val:  # validation in the middle of the epoch, same Compose
                pass
        recorded = sum(len(info["transforms"]) for info, *_ in doctor.probe.batches)
        assert recorded == 16  # one per training sample, none for the 800 validation ones
        assert doctor.report(file=None).data["torch"]["transforms"][0]["name"] == "AddOne"
    assert probes.records().transforms == [] and probes.records().samples == []
    # An IterableDataset's transforms are timed as its items are made.
    loader = DataLoader(Range(0, 12, transform=Compose([AddOne()])), batch_size=4)
    with feedline.doctor.Doctor() as doctor:
        assert [b.tolist() for b in doctor.watch(loader)] == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
        assert sum(len(info["transforms"]) for info, *_ in doctor.probe.batches) == 12


class SizedRange(Range):
    def __len__(self):
        return self.end - self.start


def test_len_of_a_watched_loader_over_an_iterable_with_len():
    loader = DataLoader(SizedRange(0, 10), batch_size=2)
    doctor = feedline.doctor.Doctor()
    w = doctor.watch(loader)
    assert len(loader) == 5 and len(w) == 5
    assert sum(1 for _ in w) == 5
    doctor.detach()
    # Without a __len__ in the dataset, the timed one has none either.
    assert not hasattr(probes.timed_class(Range), "__len__")
    assert hasattr(probes.timed_class(SizedRange), "__len__")
