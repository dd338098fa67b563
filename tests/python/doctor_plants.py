"""Planted costs for the doctor's live scenarios, shared by
tests/python/test_doctor_scenarios.py and bench/e2e/doctor_bench.py (module
level: DataLoader worker processes must be able to pickle them)."""
import time

import torchvision.transforms as T
from torch.utils.data import default_collate
from torchvision.datasets.folder import pil_loader


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
