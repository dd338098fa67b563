"""NVIDIA DALI, CPU-only (device_id=None): readers.file, then
fn.decoders.image_random_crop (the decode of only the crop's region) +
fn.resize + fn.crop_mirror_normalize for train, fn.decoders.image +
fn.resize(resize_shorter=256) + fn.crop_mirror_normalize(crop 224) for eval.
As DALI's docs recommend for speed: num_threads = cores, the default
prefetch_queue_depth (2), one pipeline built once and run per batch."""
import os
import sys

import numpy as np
import nvidia.dali as dali
import nvidia.dali.fn as fn
import nvidia.dali.types as types
from nvidia.dali import pipeline_def

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MEAN = [255 * m for m in common.MEAN]
STD = [255 * s for s in common.STD]


def make(a, files, labels):
    @pipeline_def(batch_size=a.batch, num_threads=a.cores, device_id=None, seed=a.seed, prefetch_queue_depth=2)
    def pipe():
        jpegs, lab = fn.readers.file(files=files, labels=labels, random_shuffle=a.recipe == "train",
                                     name="Reader")
        if a.recipe == "train":
            images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                                   random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3],
                                                   num_attempts=10)
            images = fn.resize(images, resize_x=224, resize_y=224, antialias=True)
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", mean=MEAN, std=STD,
                                              mirror=fn.random.coin_flip(probability=0.5))
        else:
            images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
            images = fn.resize(images, resize_shorter=256, antialias=True)
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", crop=(224, 224),
                                              mean=MEAN, std=STD)
        return images, lab

    p = pipe()
    p.build()
    steps = len(files) // a.batch

    class Epochs:
        def __iter__(self):
            for _ in range(steps):
                yield p.run()
    return Epochs()


def to_numpy(batch):
    return np.stack([np.asarray(t) for t in batch[0]]), "NCHW"


if __name__ == "__main__":
    common.run("dali", make, to_numpy, f"nvidia-dali {dali.__version__} (CPU)")
