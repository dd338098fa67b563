"""The native transforms pickle (python/feedline/_pickle.py): a recipe
sent to another process (a Ray actor, a multiprocessing worker) is the
same recipe there: every attribute equal, nested pixel and erase ops
included, and a loader made with the copy gives the same batches."""
import pickle

import torch

import feedline
from feedline import _pickle
from feedline import transforms as T


def _recipe():
    t = T.imagenet_train(64)
    t = T.with_pixel_ops(t, T.ColorJitter(0.4, 0.4, 0.4, 0.1), T.RandomGrayscale(0.2), T.GaussianBlur(3))
    return T.with_random_erasing(t, T.RandomErasing(p=0.5))


def _same(a, b):
    names = _pickle._fields(type(a))
    assert names, type(a)
    for k in names:
        x, y = getattr(a, k), getattr(b, k)
        if isinstance(x, list):
            assert len(x) == len(y), k
            for u, v in zip(x, y):
                if hasattr(type(u), "__mro__") and _pickle._fields(type(u)):
                    _same(u, v)
                else:
                    assert u == v, k
        else:
            assert repr(x) == repr(y), k


def test_every_attribute_survives_a_round_trip_nested_ops_included():
    t = _recipe()
    assert len(t.pixel_ops) == 3 and len(t.erase_ops) == 1
    _same(t, pickle.loads(pickle.dumps(t)))


def test_a_loader_with_the_copy_gives_the_same_batches(dataset):
    t = _recipe()
    copy = pickle.loads(pickle.dumps(t))
    out = []
    for recipe in (t, copy):
        ld = feedline.Loader(dataset, batch_size=16, transform=recipe, shuffle=True, seed=5, num_threads=2)
        out.append([x for x, _ in ld])
        ld.close()
    assert len(out[0]) == len(out[1]) > 0
    assert all(torch.equal(a, b) for a, b in zip(*out))
