"""feedline.doctor's Doctor (watch.py): what watch() does to, and gives back
to, a DataLoader; measure_capacity; the device and CPU accounting."""
import importlib
import json
import time

import pytest
import torch
from torch.utils.data import DataLoader

import feedline
from feedline.doctor import probes

from doctor_plants import FakeEvent, documented_paths  # noqa: F401 (fixtures)
from doctor_plants import report_loader as _loader

# -- watch mechanics ----------------------------------------------------------------------

def test_detach_restores_the_loader_and_breaking_out_records_the_step(small_images):
    loader = _loader(small_images, num_workers=1)
    ds, collate, init = loader.dataset, loader.collate_fn, loader.worker_init_fn
    compose = ds.dataset.transform
    before = list(compose.transforms)
    doctor = feedline.doctor.Doctor()
    for i, (images, _labels) in enumerate(doctor.watch(loader)):
        assert isinstance(images, torch.Tensor) and images.shape == (8, 3, 64, 64)
        assert loader.dataset is ds and probes.is_timed(ds) and isinstance(ds, torch.utils.data.Subset)
        if i == 2:
            break
    assert len(doctor.steps) == 3  # the step the loop broke out of counts
    doctor.detach()
    assert loader.dataset is ds and loader.collate_fn is collate and loader.worker_init_fn is init
    assert type(ds) is torch.utils.data.Subset and not probes.is_timed(ds)
    assert compose.transforms == before
    images, _ = next(iter(loader))
    assert isinstance(images, torch.Tensor)

def test_any_iterable_is_timed_from_the_outside():
    data = [torch.zeros(4, 3) for _ in range(20)]

    def slow():
        for x in data:
            time.sleep(0.010)
            yield x
    doctor = feedline.doctor.Doctor()
    for _ in doctor.watch(slow()):
        pass  # a free step: all the loop's time is waiting for the iterable
    r = doctor.report(file=None)
    loop = r.data["loop"]
    assert r.data["loader"]["kind"] == "iterable" and loop["samples"] == 80
    assert loop["wait_s"] >= 20 * 0.010 and loop["starvation"] == pytest.approx(loop["wait_s"] / loop["wall_s"])
    assert loop["starvation"] > 0.5
    assert r.findings[0]["id"] == "unexplained" and "measure_capacity" in r.findings[0]["fix"]
    assert r.data["loop"]["device"] is None  # no CUDA here: the host path ran
    feedline.doctor.validate(r.data)

def test_measure_capacity_runs_the_loader_alone_and_the_step_alone(small_images):
    loader = _loader(small_images, persistent_workers=True)
    seen = []

    def step(batch):
        seen.append(batch[0].shape[0])
        time.sleep(0.010)
    doctor = feedline.doctor.Doctor(step_fn=step)
    for batch in doctor.watch(loader):
        step(batch)
    cap = doctor.measure_capacity(loader, batches=10, steps=5)
    # Upper bounds from the planted sleeps (a busy machine only lowers the
    # rates): 2 workers, 8 samples of >= 4 ms each make at most ~500
    # samples/s (700: batches prepared before the timing began); a step of
    # >= 10 ms takes at most 800.
    assert 0 < cap["loader_samples_per_s"] < 700
    assert 0 < cap["step_samples_per_s"] <= 8 / 0.010
    assert seen[-5:] == [8] * 5  # the step alone ran on real batches
    r = doctor.report(file=None)
    assert r.data["capacity"]["loader_samples_per_s"]["source"] == "measured"
    assert r.data["capacity"]["step_samples_per_s"]["source"] == "measured"
    assert r.data["capacity"]["bound"] == "loader"
    doctor.detach()

def test_module_level_watch_and_the_report_files(small_images, tmp_path):
    w = feedline.doctor.watch(_loader(small_images, num_workers=1))
    for _ in w:
        pass
    r = w.report(file=None, json=tmp_path / "a.json", html=tmp_path / "a.html", trace=tmp_path / "a.trace.json")
    w.doctor.detach()
    assert feedline.doctor.validate(json.loads((tmp_path / "a.json").read_text()))
    assert feedline.doctor.validate_trace(json.loads((tmp_path / "a.trace.json").read_text()))
    assert (tmp_path / "a.html").read_text().startswith("<!DOCTYPE html>")
    assert r.top["rank"] == 1

def test_module_level_watch_report_restores_the_loader_even_with_persistent_workers():
    data = [torch.zeros(3) for _ in range(16)]
    loader = DataLoader(data, batch_size=4, num_workers=2, persistent_workers=True)
    w = feedline.doctor.watch(loader)
    for _epoch in range(2):
        for _ in w:
            pass
        # Between epochs the persistent workers (started with the probes) live on.
        assert isinstance(loader.dataset, probes.TimedContainer)  # a list: not a torch Dataset
    it = loader._iterator
    w.report(file=None)
    assert loader.dataset is data and loader._iterator is not it
    assert all(type(b) is torch.Tensor for b in loader)
    w.report(file=None)  # idempotent
    w.close()
    # Without persistent workers each epoch's end restores the loader: no report needed.
    loader = DataLoader(data, batch_size=4, num_workers=1)
    for _ in feedline.doctor.watch(loader):
        pass
    assert loader.dataset is data and type(next(iter(loader))) is torch.Tensor

def test_persistent_workers_keep_running_across_watched_epochs():
    data = [torch.zeros(3) for _ in range(16)]
    loader = DataLoader(data, batch_size=4, num_workers=1, persistent_workers=True)
    with feedline.doctor.Doctor() as doctor:
        for _ in doctor.watch(loader):
            pass
        it = loader._iterator
        for _ in doctor.watch(loader):
            pass
        assert loader._iterator is it  # not restarted by the doctor between epochs
    assert loader.dataset is data

# -- accounting on synthetic evidence ----------------------------------------------------------

def test_device_starvation_leaves_out_warmup_and_gaps_across_epochs():
    from feedline.doctor.watch import _DeviceTimer
    dev = _DeviceTimer("auto")
    # Two epochs of 8 steps: 10 ms busy, 2 ms idle between steps; the first
    # two steps of each epoch wait 50 ms (warm-up), and 5 s of validation
    # separate the epochs.
    t = 0.0
    for epoch in range(2):
        for i in range(8):
            t += 0.050 if i < 2 else 0.002
            dev.pairs.append((FakeEvent(t), FakeEvent(t + 0.010), epoch))
            t += 0.010
        t += 5.0
    s = dev.summary(skip=2)
    assert s["steps"] == 16 and s["steady_steps"] == 12
    assert s["busy_s"] == pytest.approx(12 * 0.010)
    # The third step's wait counts (the loop waited for it in steady state);
    # the first step of epoch 1 (after validation) and the warm-up do not.
    assert s["idle_s"] == pytest.approx(12 * 0.002)
    assert s["starvation"] == pytest.approx(0.002 / 0.012)
    doc = documented_paths()
    assert all(f"loop.device.{k}" in doc for k in s)

def test_device_events_and_cpu_window_count_every_step_past_keep_steps(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Event", lambda enable_timing=True: FakeEvent())
    doctor = feedline.doctor.Doctor(keep_steps=5)
    doctor._device.enabled = True
    for _ in doctor.watch([torch.zeros(2, 3)] * 20):
        pass
    assert len(doctor.steps) == 5 and len(doctor._device.pairs) == 5
    assert doctor.step_count == 20 and doctor.epochs[0]["samples"] == 40
    assert doctor.cpu_window[1][3] == 20  # the CPU window counts all 20 steps

def test_host_to_device_copy_is_measured_only_when_the_loop_used_cuda(monkeypatch):
    watch_mod = importlib.import_module("feedline.doctor.watch")  # (feedline.doctor.watch is the function)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    calls = []
    monkeypatch.setattr(watch_mod.Doctor, "_measure_h2d", lambda self: calls.append(1))
    loader = DataLoader([torch.zeros(3)] * 16, batch_size=4)
    doctor = feedline.doctor.Doctor()
    for _ in doctor.watch(loader):
        pass
    doctor.measure_capacity(loader, batches=2)
    assert calls == [] and doctor._h2d is None
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)  # the loop touched CUDA
    doctor.measure_capacity(loader, batches=2)
    assert calls == [1]
