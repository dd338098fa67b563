"""Grain with PIL: MapDataset.source -> shuffle -> random_map (PIL decode,
RandomResizedCrop drawn as torchvision draws it, flip, normalise in numpy)
-> repeat -> to_iter_dataset -> batch -> mp_prefetch (eval: sequential
slices, so the file order is kept), as Grain's
performance guide recommends: worker processes = cores (persistent: one
iterator across epochs), one read thread in each, a prefetch buffer of one
batch's worth of images per worker."""
import os
import sys

import grain
import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MEAN = np.array(common.MEAN, np.float32).reshape(1, 1, 3)
INV_STD = (1 / np.array(common.STD, np.float32)).reshape(1, 1, 3)


def normalise(img):
    x = np.asarray(img, dtype=np.float32) * np.float32(1 / 255)
    return np.ascontiguousarray(((x - MEAN) * INV_STD).transpose(2, 0, 1))


class Train:
    def __init__(self, files):
        self.files = files

    def __call__(self, i, rng):
        with open(self.files[i], "rb") as f:
            img = Image.open(f).convert("RGB")
        left, top, w, h = common.rrc_params(rng, img.width, img.height)
        img = img.crop((left, top, left + w, top + h)).resize((224, 224), Image.BILINEAR)
        if rng.uniform() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        return normalise(img)


class Eval:
    def __init__(self, files):
        self.files = files

    def __call__(self, i):
        with open(self.files[i], "rb") as f:
            img = Image.open(f).convert("RGB")
        w, h = common.eval_size(img.width, img.height)
        img = img.resize((w, h), Image.BILINEAR)
        left, top = int(round((w - 224) / 2.0)), int(round((h - 224) / 2.0))
        return normalise(img.crop((left, top, left + 224, top + 224)))


def make(a, files, labels):
    ds = grain.MapDataset.range(len(files))
    if a.recipe == "train":
        ds = ds.shuffle(seed=a.seed).random_map(Train(files), seed=a.seed)
    else:
        ds = ds.map(Eval(files))
    ds = ds.repeat()
    it = ds.to_iter_dataset(grain.ReadOptions(num_threads=1, prefetch_buffer_size=a.batch // a.cores))
    it = it.batch(a.batch, drop_remainder=True)
    # Eval keeps the file order: each worker takes a consecutive slice of the
    # records (Grain's sequential_slice) instead of every num_workers-th one,
    # so the first batch holds the first files, the images the output check
    # compares with torchvision's. Train slices by stride: a global shuffle.
    return it.mp_prefetch(grain.MultiprocessingOptions(num_workers=a.cores, per_worker_buffer_size=1),
                          sequential_slice=a.recipe != "train")


def to_numpy(batch):
    return batch, "NCHW"


if __name__ == "__main__":
    from importlib.metadata import version

    import PIL
    common.run("grain", make, to_numpy, f"grain {version('grain')}, Pillow {PIL.__version__}")
