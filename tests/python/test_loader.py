"""feedline.Loader (python/bindings/loader_bindings.cc, python/feedline/loader.py):
shapes, values against torchvision, determinism, zero copy, resume, lifetime,
errors. docs/reliability.md 16-28 as they apply to Python."""
import gc
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch
import torchvision.transforms as T
from PIL import Image

import feedline


def thread_count():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return -1


def settled_thread_count():
    """The thread count once earlier tests' loaders are gone. A loader kept
    alive only by a reference cycle (an exception's traceback holds the frame
    that held it) is closed when the collector frees it, so collect first,
    then wait until its joined threads have left the count."""
    gc.collect()
    last, stable_since = thread_count(), time.time()
    deadline = time.time() + 10.0
    while time.time() < deadline and time.time() - stable_since < 0.3:
        time.sleep(0.02)
        now = thread_count()
        if now != last:
            last, stable_since = now, time.time()
    return last

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def epoch_of(loader):
    return [(b.fields["image"].clone(), b.fields["label"].clone(), b.sample_ids.copy()) for b in loader.batches()]


def assert_same(a, b):
    assert len(a) == len(b)
    for (ia, la, sa), (ib, lb, sb) in zip(a, b):
        assert torch.equal(ia, ib) and torch.equal(la, lb) and np.array_equal(sa, sb)


def test_yields_image_and_label_tensors_in_torch_vocabulary(dataset):
    loader = feedline.Loader(dataset, batch_size=16, shuffle=True, num_threads=2)
    assert len(loader) == 6
    assert loader.classes == ["class_0000", "class_0001", "class_0002", "class_0003"]
    shapes, labels = [], []
    for images, batch_labels in loader:  # views are dropped each step, as in training
        shapes.append((tuple(images.shape), images.dtype))
        labels.append(batch_labels.clone())
    assert len(shapes) == 6
    assert shapes[0] == ((16, 3, 224, 224), torch.float32)
    assert labels[0].shape == (16,) and labels[0].dtype == torch.int64
    assert set(torch.cat(labels).tolist()) == {0, 1, 2, 3}


@pytest.mark.parametrize("kwargs,shape,dtype", [
    (dict(channels_last=True), (8, 224, 224, 3), torch.float32),
    (dict(dtype=torch.float16), (8, 3, 224, 224), torch.float16),
    (dict(dtype=torch.bfloat16), (8, 3, 224, 224), torch.bfloat16),
    (dict(dtype=torch.uint8), (8, 3, 224, 224), torch.uint8),
])
def test_output_dtypes_and_layouts(dataset, kwargs, shape, dtype):
    loader = feedline.Loader(dataset, batch_size=8, transform=feedline.transforms.imagenet_eval(**kwargs))
    images, _ = next(iter(loader))
    assert images.shape == shape and images.dtype == dtype
    ref = feedline.Loader(dataset, batch_size=8, transform=feedline.transforms.imagenet_eval())
    ref_images, _ = next(iter(ref))
    if dtype in (torch.float16, torch.bfloat16):
        assert torch.equal(images, ref_images.to(dtype))
    if kwargs.get("channels_last"):
        assert torch.equal(images.permute(0, 3, 1, 2), ref_images)


def test_values_match_torchvision_eval_pipeline(dataset):
    loader = feedline.Loader(dataset, batch_size=16, transform=feedline.transforms.imagenet_eval(exact=True))
    tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)])
    files = sorted(p for p in dataset.rglob("*") if p.is_file())
    batch = next(loader.batches())
    for i, sample in enumerate(batch.sample_ids):
        ref = tf(Image.open(files[sample]).convert("RGB"))
        diff255 = (batch.fields["image"][i] - ref).abs() * torch.tensor(STD)[:, None, None] * 255
        assert diff255.mean() <= 1.0, files[sample]


def test_same_bytes_for_any_thread_count_and_run(dataset):
    runs = [epoch_of(feedline.Loader(dataset, batch_size=10, shuffle=True, seed=3, num_threads=t))
            for t in (1, 2, 3)]
    assert_same(runs[0], runs[1])
    assert_same(runs[0], runs[2])
    other = epoch_of(feedline.Loader(dataset, batch_size=10, shuffle=True, seed=4, num_threads=2))
    assert not torch.equal(runs[0][0][0], other[0][0])


def test_epochs_advance_and_set_epoch_rewinds(dataset):
    loader = feedline.Loader(dataset, batch_size=32, shuffle=True, seed=1)
    e0 = epoch_of(loader)
    e1 = epoch_of(loader)
    assert loader.epoch == 2
    assert not np.array_equal(e0[0][2], e1[0][2])
    loader.set_epoch(1)
    assert_same(epoch_of(loader), e1)


def test_a_pass_that_got_every_batch_ends_the_epoch_even_without_the_end(dataset):
    loader = feedline.Loader(dataset, batch_size=32, shuffle=True, seed=1)
    first = [ids.copy() for ids, _ in zip((b.sample_ids for b in loader.batches()), range(len(loader)))]
    second = [b.sample_ids.copy() for b in loader.batches()]
    assert loader.epoch == 2
    reference = feedline.Loader(dataset, batch_size=32, shuffle=True, seed=1)
    reference.set_epoch(1)
    assert all(np.array_equal(a, b.sample_ids) for a, b in zip(second, reference.batches()))
    assert not np.array_equal(first[0], second[0])
    # An early stop still restarts the epoch.
    it = loader.batches()
    started = next(it).sample_ids.copy()
    del it
    assert np.array_equal(next(loader.batches()).sample_ids, started)


def test_tensors_are_zero_copy_and_stay_valid_while_held(dataset):
    loader = feedline.Loader(dataset, batch_size=8, prefetch_batches=3)
    held = []
    for i, (images, _labels) in enumerate(loader):
        if i < 2:
            held.append((images, images.clone()))
        if i == 6:
            break
    for view, copy in held:
        assert torch.equal(view, copy)  # buffers are not recycled while referenced
    assert loader.stats()["ring"]["buffers_held_by_consumer"] >= 2


def test_holding_every_buffer_is_an_error_not_a_hang(dataset):
    loader = feedline.Loader(dataset, batch_size=8, prefetch_batches=1)  # 2 buffers
    it = iter(loader)
    held = [next(it), next(it)]
    with pytest.raises(feedline.ResourceError, match="holds all 2 batch buffers"):
        next(it)
    del held


def test_resume_before_every_batch_gives_exactly_the_rest(dataset):
    reference = feedline.Loader(dataset, batch_size=16, shuffle=True, seed=9, num_threads=1)
    full = epoch_of(reference) + epoch_of(reference)
    for k in range(len(full) // 2 + 1):
        first = feedline.Loader(dataset, batch_size=16, shuffle=True, seed=9, num_threads=2)
        it = first.batches()
        before = []
        for _ in range(k):  # exactly k batches consumed, others in flight
            b = next(it)
            before.append((b.fields["image"].clone(), b.fields["label"].clone(), b.sample_ids.copy()))
        state = first.state_dict()
        first.close()
        second = feedline.Loader(dataset, batch_size=16, shuffle=True, seed=9, num_threads=3)
        second.load_state_dict(state)
        after = epoch_of(second) + epoch_of(second)
        assert_same(before + after, full[:len(before) + len(after)])
        assert len(before) + len(after) == len(full)


def test_state_from_other_options_is_refused(dataset):
    donor = feedline.Loader(dataset, batch_size=16, shuffle=True, seed=1)
    loader = feedline.Loader(dataset, batch_size=16, shuffle=True, seed=2)
    with pytest.raises(ValueError, match="seed is 1 in the saved state but 2 here"):
        loader.load_state_dict(donor.state_dict())
    with pytest.raises(ValueError, match="not a feedline loader state"):
        loader.load_state_dict({"version": 99})


def test_elastic_resume_keeps_global_batches(dataset):
    def run(world, state, max_batches, global_batches):
        saved = None
        for rank in range(world):
            l = feedline.Loader(dataset, batch_size=12 // world, shuffle=True, seed=5, drop_last=True,
                                rank=rank, world_size=world, elastic=True)
            if state:
                l.load_state_dict(state)
            it = l.batches()
            for _ in range(max_batches):
                b = next(it, None)
                if b is None:
                    break
                global_batches.setdefault(b.index, set()).update(b.sample_ids.tolist())
            if rank == 0:
                saved = l.state_dict()
        return saved

    uninterrupted, elastic = {}, {}
    run(1, None, 8, uninterrupted)
    s = run(4, None, 3, elastic)
    s = run(2, s, 2, elastic)
    run(3, s, 3, elastic)
    assert elastic == uninterrupted and len(uninterrupted) == 8


def test_break_and_del_leave_no_threads(dataset):
    base = settled_thread_count()
    for walk_away in (0, 1, 3):
        loader = feedline.Loader(dataset, batch_size=8, num_threads=3)
        for i, _ in enumerate(loader):
            if i >= walk_away:
                break
        del loader
        gc.collect()
    deadline = time.time() + 30.0  # a hang guard: the loop ends as soon as they are gone
    while thread_count() != base and time.time() < deadline:
        time.sleep(0.01)
    assert thread_count() == base


def test_exception_in_the_training_loop_then_close(dataset):
    base = settled_thread_count()
    loader = feedline.Loader(dataset, batch_size=8, num_threads=2)
    with pytest.raises(RuntimeError, match="boom"):
        for _batch in loader:
            raise RuntimeError("boom")
    loader.close()
    assert thread_count() == base
    with pytest.raises(feedline.Error, match="closed"):
        next(iter(loader))


def test_bad_file_raises_naming_it_or_is_skipped_and_counted(dataset, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(dataset, root)
    bad = root / "class_0001" / "zz_truncated.jpg"
    good = next((root / "class_0001").glob("*.jpg")).read_bytes()
    bad.write_bytes(good[: len(good) // 2])
    strict = feedline.Loader(root, batch_size=97, transform=feedline.transforms.imagenet_eval())
    with pytest.raises(feedline.Error, match="zz_truncated.jpg.*(corrupt JPEG|end-of-image)"):
        list(strict)
    lenient = feedline.Loader(root, batch_size=97, max_errors=1, transform=feedline.transforms.imagenet_eval())
    batches = list(lenient.batches())
    assert sum(len(b) for b in batches) == 96
    assert "zz_truncated.jpg" in batches[0].skipped[0]
    assert lenient.stats()["errors"]["by_reason"] == {"decode_transform/DataLoss": 1}


def test_record_loader_yields_raw_bytes_lengths_and_labels(dataset):
    files = sorted(p for p in dataset.rglob("*") if p.is_file())
    largest = max(p.stat().st_size for p in files)
    loader = feedline.RecordLoader(dataset, batch_size=8, max_record_bytes=largest, shuffle=True, seed=2)
    batch = next(loader.batches())
    data, lengths, labels = batch.fields["bytes"], batch.fields["length"], batch.fields["label"]
    assert data.dtype == torch.uint8 and data.shape == (8, largest)
    for i, sample in enumerate(batch.sample_ids):
        raw = files[sample].read_bytes()
        assert lengths[i] == len(raw)
        assert bytes(data[i, : len(raw)].numpy()) == raw
        assert labels[i] == loader.classes.index(files[sample].parent.name)
    with pytest.raises(feedline.ResourceError, match="over max_record_bytes=64"):
        next(iter(feedline.RecordLoader(dataset, batch_size=8, max_record_bytes=64)))


def test_keyboard_interrupt_reaches_a_consumer_waiting_inside_cpp(dataset, tmp_path):
    # One thread, one huge batch: the consumer spends its time waiting inside
    # C++ (Next polls for signals every 0.1 s without the GIL). Ctrl-C must
    # reach it and close() must join. The bound is a hang guard, not a
    # latency measurement: a busy machine may take a while to schedule it.
    script = tmp_path / "interrupt.py"
    script.write_text(textwrap.dedent(f"""
        import faulthandler, signal, sys, time, feedline
        # A hang shows where it is: every thread's stack on stderr after 50 s.
        faulthandler.dump_traceback_later(50, exit=False)
        # Python leaves SIGINT ignored when it starts with it ignored (as in
        # any job a non-interactive shell put in the background): ask for
        # KeyboardInterrupt explicitly, as a user's terminal would give it.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        loader = feedline.Loader({str(dataset)!r}, batch_size=96, num_threads=1, prefetch_batches=1,
                                 transform=feedline.transforms.imagenet_train(exact=True))
        print("ready", flush=True)
        try:
            while True:
                for _ in loader:
                    pass
        except KeyboardInterrupt:
            print("interrupted", time.monotonic(), flush=True)
            loader.close()
            sys.exit(0)
    """))
    env = dict(os.environ)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"no exit 120 s after SIGINT; stdout: {out!r}; stderr:\n{err}") from None
    assert proc.returncode == 0, (out, err)
    when = float(out.split("interrupted")[1].split()[0])
    assert 0 <= when - sent < 30.0


def test_memory_plateaus_over_twenty_epochs(dataset):
    """docs/reliability.md 21: batch memory stays within the ring, and RSS does
    not drift once the ring's buffers exist."""
    loader = feedline.Loader(dataset, batch_size=16, num_threads=2, shuffle=True)

    def rss_kib():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))

    samples = []
    for _epoch in range(20):
        for _ in loader:
            ring = loader.stats()["ring"]
            assert ring["bytes_held"] <= ring["buffers_max"] * ring["batch_bytes"] <= ring["max_bytes"]
        samples.append(rss_kib())
    ring = loader.stats()["ring"]
    # Up to epoch 5 the ring may still be allocating its buffers lazily;
    # after that, at most the buffers not yet allocated may appear.
    unallocated_kib = (ring["buffers_max"] - ring["buffers_allocated"]) * ring["batch_bytes"] // 1024
    drift = samples[-1] - samples[5]
    assert drift <= unallocated_kib + max(2048, samples[5] // 100), (samples, ring)


def test_budget_and_thread_arguments_are_checked(dataset):
    for kwargs, match in ((dict(ram_budget=0), "ram_budget"), (dict(ram_budget=1 << 30, max_bytes=1 << 30), "not both"),
                          (dict(cpu_budget=0), "cpu_budget"), (dict(num_threads=-1), "num_threads"),
                          (dict(prefetch_batches=0), "prefetch_batches")):
        with pytest.raises(ValueError, match=match):
            feedline.Loader(dataset, batch_size=8, **kwargs)
    # Defaults are auto; the tuner's state is in stats().
    with feedline.Loader(dataset, batch_size=8, num_threads=0, cpu_budget=2) as loader:
        next(iter(loader))
        t = loader.stats()["tuner"]
        assert t["threads_auto"] and t["ring_auto"] and t["cpu_budget"] == 2
        assert 1 <= t["threads"] <= 2 and t["charged_bytes"] <= t["ram_budget"]
