"""feedline.Loader with the same recipes (feedline.transforms.imagenet_train
/ imagenet_eval), built for the torch environment's interpreter: num_threads
= cores, prefetch_batches=3 (bench/e2e/feedline_python.py's setting)."""
import os
import sys

import torch

import feedline

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def make(a, files, labels):
    tf = feedline.transforms.imagenet_train() if a.recipe == "train" else feedline.transforms.imagenet_eval()
    return feedline.Loader(a.data, batch_size=a.batch, transform=tf, shuffle=a.recipe == "train", seed=a.seed,
                           drop_last=True, num_threads=a.cores, prefetch_batches=3)


def to_numpy(batch):
    return batch[0].numpy(), "NCHW"


if __name__ == "__main__":
    common.run("feedline", make, to_numpy, f"feedline (built here), torch {torch.__version__}")
