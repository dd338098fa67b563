"""The module-level pair feedline.doctor.watch(loader) / feedline.doctor.report()
(python/feedline/doctor/__init__.py): report() diagnoses the most recent
watch() and restores its loader. (The name `report` was once a submodule,
so `feedline.doctor.report()` raised "'module' object is not callable".)"""
import io
import json

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import feedline
from feedline import doctor


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.full((3,), float(i * i)), i


def test_report_is_a_function_and_the_report_module_is_private():
    assert callable(doctor.report) and callable(doctor.watch)
    import feedline.doctor._report as private
    assert private.Report is doctor.Report


def test_report_before_any_watch_names_what_to_do(monkeypatch):
    monkeypatch.setattr(doctor, "_last", None)
    with pytest.raises(RuntimeError, match=r"feedline\.doctor\.watch\(loader\)"):
        doctor.report(file=None)


def test_module_level_watch_then_report_diagnoses_the_loop_and_restores_the_loader(tmp_path):
    dataset = Squares(40)
    loader = DataLoader(dataset, batch_size=4, num_workers=0)
    seen = []
    for _images, labels in doctor.watch(loader):
        seen.extend(labels.tolist())
    assert seen == list(range(40))  # every batch reached the loop, in order
    out = io.StringIO()
    r = doctor.report(file=out, json=tmp_path / "doctor.json")
    assert isinstance(r, doctor.Report)
    assert r.data["loader"]["kind"] == "torch"
    assert r.data["loop"]["steps"] == 10 and r.data["loop"]["samples"] == 40
    assert out.getvalue().strip() == r.summary().strip()
    saved = json.loads((tmp_path / "doctor.json").read_text())
    assert doctor.validate(saved) and saved["loop"]["samples"] == 40
    assert loader.dataset is dataset  # report() detached: the loader is the user's again


def test_report_follows_the_most_recent_watch():
    first = doctor.watch([torch.zeros(2, 3)] * 5)
    for _ in first:
        pass
    second = doctor.watch([torch.zeros(7, 3)] * 3)
    for _ in second:
        pass
    r = doctor.report(file=None)
    assert r.data["loop"]["steps"] == 3 and r.data["loop"]["samples"] == 21
    assert r.data["loader"]["kind"] == "iterable"
    # The earlier watch is still reportable through what watch() returned.
    assert first.report(file=None).data["loop"]["steps"] == 5


def test_watch_passes_doctor_options_through():
    w = doctor.watch([torch.zeros(1)] * 2, cores=3)
    assert isinstance(w.doctor, doctor.Doctor) and w.doctor.cores == 3
    for _ in w:
        pass
    assert feedline.doctor.report(file=None).data["loop"]["steps"] == 2
