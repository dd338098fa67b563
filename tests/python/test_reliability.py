"""Issue 12 at the Python face (docs/reliability.md 27, 37, 38): a state from another
dataset or recipe is refused, an all-bad batch never reaches the loop, and a
forked child or a pickle gets a clear error instead of an abort or a hang."""
import os
import pickle
import signal

import numpy as np
import pytest
from PIL import Image

import feedline


def make_folder(root, names, corrupt=()):
    """One class folder `c` of small JPEGs; names in `corrupt` hold junk."""
    d = root / "c"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in names:
        if name in corrupt:
            (d / name).write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
        else:
            Image.fromarray(rng.integers(0, 255, (40, 48, 3), dtype=np.uint8)).save(d / name, quality=90)
    return str(root)


def eval_transform(size=32):
    return feedline.transforms.imagenet_eval(size, resize=size)


def test_an_all_bad_batch_is_skipped_and_counted_never_delivered_empty(tmp_path):
    names = [f"a{i}.jpg" for i in range(4)] + [f"b{i}.jpg" for i in range(4)] + [f"c{i}.jpg" for i in range(2)]
    root = make_folder(tmp_path, names, corrupt={f"b{i}.jpg" for i in range(4)} | {"c0.jpg"})
    with feedline.Loader(root, batch_size=4, transform=eval_transform(), max_errors=10, num_threads=2) as loader:
        for _ in range(2):  # two epochs: the rule holds at every epoch
            sizes = [len(labels) for _, labels in loader]
            assert sizes == [4, 1]  # batch 1 (all bad) is gone; the last keeps its one good sample
        errors = loader.stats()["errors"]
        assert errors["empty_batches"] == 2 and errors["skipped"] == 10


def test_a_state_from_another_dataset_of_the_same_size_is_refused(tmp_path):
    a = make_folder(tmp_path / "a", [f"x{i}.jpg" for i in range(8)])
    b = make_folder(tmp_path / "b", [f"y{i}.jpg" for i in range(8)])
    with feedline.Loader(a, batch_size=4, transform=eval_transform(), num_threads=1) as la:
        next(iter(la))
        state = la.state_dict()
    with feedline.Loader(b, batch_size=4, transform=eval_transform(), num_threads=1) as lb:
        with pytest.raises(feedline.Error, match="dataset fingerprint") as e:
            lb.load_state_dict(state)
        assert isinstance(e.value, ValueError)  # InvalidArgumentError keeps its builtin
    # Another recipe on the same data: refused too.
    with feedline.Loader(a, batch_size=4, transform=eval_transform(24), num_threads=1) as lc:
        with pytest.raises(feedline.Error, match="transform fingerprint"):
            lc.load_state_dict(state)
    # The same dataset and recipe resume.
    with feedline.Loader(a, batch_size=4, transform=eval_transform(), num_threads=1) as ld:
        ld.load_state_dict(state)
        assert len(list(ld)) == 1


def test_a_forked_child_gets_a_clear_error_and_can_close_the_loader(tmp_path):
    root = make_folder(tmp_path, [f"x{i}.jpg" for i in range(16)])
    loader = feedline.Loader(root, batch_size=4, transform=eval_transform(), num_threads=2)
    it = iter(loader)
    images, _ = next(it)
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery from here on, only os._exit
        code = 3
        try:
            signal.alarm(30)  # a hang kills the child, which the parent sees
            try:
                next(it)
            except feedline.Error as e:
                if "forked child" in str(e):
                    code = 0
            loader.close()
            del images
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), f"child died by signal {os.WTERMSIG(status)}"
    assert os.WEXITSTATUS(status) == 0
    assert sum(1 for _ in it) == 3  # the parent's loader is untouched
    loader.close()


def test_pickling_a_loader_is_a_clear_type_error(tmp_path):
    root = make_folder(tmp_path, [f"x{i}.jpg" for i in range(4)])
    with feedline.Loader(root, batch_size=4, transform=eval_transform(), num_threads=1) as loader:
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(loader)


def ids_of(batch):
    return [int(i) for i in batch.sample_ids]


def in_thread(fn):
    """Runs fn on another thread and returns what it raised (None if nothing)."""
    import threading
    raised = []

    def run():
        try:
            fn()
        except BaseException as e:  # noqa: B036 (handed to the test)
            raised.append(e)

    t = threading.Thread(target=run, name="second-consumer")
    t.start()
    t.join(timeout=60)
    assert not t.is_alive(), "the second consumer hung"
    return raised[0] if raised else None


@pytest.mark.parametrize("how", ["batches", "iter", "batch_map"])
def test_a_second_thread_looping_over_the_loader_is_refused_and_no_sample_is_seen_twice(tmp_path, how):
    # Issue 40: two threads each running `for b in L.batches()` got 50 and 16
    # of 32 samples and no error; a loader has one consumer (item 37).
    root = make_folder(tmp_path, [f"x{i:02d}.jpg" for i in range(32)])
    kw = {"batch_map": lambda b: b} if how == "batch_map" else {}
    with feedline.Loader(root, batch_size=2, transform=eval_transform(), num_threads=2, shuffle=True, seed=3,
                         fields={"image": "jpg", "label": "cls"} if how != "batches" else None, **kw) as loader:
        if how == "batches":
            loop = loader.batches
            count = lambda b: ids_of(b)  # noqa: E731
        else:
            loop = lambda: iter(loader)  # noqa: E731
            count = lambda b: [len(b["label"])]  # noqa: E731
        first = loop()
        seen = count(next(first))  # this thread owns the pass now

        def second():
            for _b in loop():
                raise AssertionError("the second thread was handed a batch")

        err = in_thread(second)
        assert isinstance(err, RuntimeError), err
        assert "already being iterated by thread 'MainThread'" in str(err)
        assert "'second-consumer'" in str(err) and "one consumer" in str(err)
        for b in first:  # the first loop goes on, untouched
            seen += count(b)
        if how == "batches":
            assert sorted(seen) == list(range(32))  # every sample exactly once
        else:
            assert sum(seen) == 32
        # Once the first pass is over, another thread may take the next one.
        epoch = []
        assert in_thread(lambda: epoch.extend(count(b) for b in loop())) is None
        assert len(epoch) == 16


def test_an_iterator_superseded_by_a_newer_pass_raises_instead_of_sharing_its_batches(tmp_path):
    root = make_folder(tmp_path, [f"x{i:02d}.jpg" for i in range(32)])
    with feedline.Loader(root, batch_size=2, transform=eval_transform(), num_threads=2, shuffle=True,
                         seed=3) as loader:
        old = loader.batches()
        next(old)
        new = loader.batches()  # restarts the epoch, as iter() on a torch DataLoader does
        ids = ids_of(next(new))
        with pytest.raises(RuntimeError, match="superseded"):
            next(old)
        for b in new:
            ids += ids_of(b)
        assert sorted(ids) == list(range(32))


def png_header_only(width, height):
    """A 60-byte PNG: a valid IHDR claiming width x height, an empty IDAT, IEND."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


def rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def test_tiny_files_claiming_huge_images_cost_no_memory_and_name_size_and_budget(tmp_path):
    """Issue 12 class 3: 60-byte PNGs claiming 12000 x 12000 (under Pillow's bomb
    limit) cost 0.4 GB of scratch each if allocated; charged first, they fail
    naming the bytes and the budget, and the memory never moves."""
    root = make_folder(tmp_path, [f"a{i}.jpg" for i in range(6)])
    for i in range(6):
        (tmp_path / "c" / f"b{i}.png").write_bytes(png_header_only(12000, 12000))
    before = rss_bytes()
    with feedline.Loader(root, batch_size=4, transform=eval_transform(), max_errors=100, num_threads=2,
                         ram_budget=256 << 20) as loader:
        for _ in range(3):
            assert sum(len(labels) for _, labels in loader) == 6
        errors = loader.stats()["errors"]
        assert errors["skipped"] == 18
        assert all("12000x12000 png" in e and "max_bytes=268435456" in e for e in errors["log"]), errors["log"]
        assert sum(w["scratch_bytes"] for w in loader.stats()["workers"]) <= 2 * (32 << 20)
    # Nothing near 0.4 GB per file was ever allocated (a loose bound: the
    # process's own noise is a few MB).
    assert rss_bytes() - before < 100 << 20


def test_a_pillow_decompression_bomb_is_refused_from_the_header(tmp_path):
    root = make_folder(tmp_path, ["a.jpg"])
    (tmp_path / "c" / "bomb.png").write_bytes(png_header_only(16384, 16384))
    with feedline.Loader(root, batch_size=2, transform=eval_transform(), num_threads=1) as loader:
        with pytest.raises(feedline.InvalidArgumentError, match="over max_pixels 178956970"):
            list(loader)
