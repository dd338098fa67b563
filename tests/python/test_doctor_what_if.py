"""What feedline would give (issue 19, item 3): the doctor runs
feedline.Loader with the DataLoader's translated transform and batch size on
a sample of the same files, and reports the measured rate with the code
change; where it cannot, the report's what_if section says why. No timing
thresholds: a rate above zero, the exact code, the reason's words."""
import time

import torch
import torchvision.transforms as T
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder

import feedline.doctor

from doctor_plants import SlowAugment, SlowCollate, SlowStorage, tf


def watched(loader, step_s=0.002, epochs=1, **kwargs):
    kwargs.setdefault("what_if_s", 1.0)
    with feedline.doctor.Doctor(**kwargs) as doctor:
        for _ in range(epochs):
            for _batch in doctor.watch(loader):
                time.sleep(step_s)
        return doctor.report(file=None)


def finding(report, fid):
    return next((f for f in report.findings if f["id"] == fid), None)


def test_what_if_on_an_image_folder_measures_feedline_and_gives_the_code(small_images):
    ds = ImageFolder(small_images, transform=tf())
    report = watched(DataLoader(ds, batch_size=16, num_workers=0, shuffle=True))
    feedline.doctor.validate(report.data)
    w = report.data["what_if"]
    assert w["ran"] and w["reason"] is None, w
    assert w["files"] == 200 and w["batch_size"] == 16 and w["dataset"] == "ImageFolder"
    assert w["samples"] > 0 and w["samples_per_s"] > 0
    code = f"import feedline\nloader = feedline.Loader({str(small_images)!r}, batch_size=16, shuffle=True, " \
           "transform=transform)"
    assert w["code"] == code
    f = finding(report, "feedline_what_if")
    assert f is not None and f["fix"].endswith(code)
    assert f["title"].startswith("feedline.Loader on 200 of your files: ~")
    assert f["evidence"]["feedline_samples_per_s"] == w["samples_per_s"]
    # Predicted: the measured rate, capped by the step's demand; never below the loop's own rate.
    demand = f["evidence"]["step_samples_per_s"]
    now = report.data["loop"]["steady_samples_per_s"]
    assert f["predicted_samples_per_s"] == round(max(min(w["samples_per_s"], demand), now), 3)
    # An alternative, not a cause: after every other finding.
    assert f["rank"] == len(report.findings)
    assert "what_if" in report.summary() or "feedline.Loader on 200" in report.summary()


def test_what_if_reads_the_subset_and_keeps_the_class_folders(small_images, monkeypatch):
    """A Subset's files, sampled across the classes (symlinks in class folders)."""
    import feedline.doctor.what_if as wi
    seen = {}
    real = wi._symlink_tree

    def spy(samples, classes, files, into, repeats=1):
        n = real(samples, classes, files, into, repeats)
        import os
        seen["classes"] = sorted(os.listdir(into))
        seen["n"] = n
        seen["links"] = sum(len(os.listdir(os.path.join(into, c))) for c in seen["classes"])
        return n
    monkeypatch.setattr(wi, "_symlink_tree", spy)
    ds = ImageFolder(small_images, transform=tf())
    sub = torch.utils.data.Subset(ds, list(range(0, 256, 2)))  # 128 images over the 4 classes
    report = watched(DataLoader(sub, batch_size=8))
    w = report.data["what_if"]
    assert w["ran"], w
    assert seen == {"classes": ds.classes, "n": 128, "links": 128 * wi.REPEATS} and w["files"] == 128
    assert any("Subset" in n for n in w["notes"])


def test_untranslatable_transform_gives_the_reason_instead(small_images):
    ds = ImageFolder(small_images, transform=tf(SlowAugment(0.0)))
    report = watched(DataLoader(ds, batch_size=8))
    w = report.data["what_if"]
    assert not w["ran"] and w["samples_per_s"] is None
    assert "no native equivalent" in w["reason"] and "SlowAugment" in w["reason"]
    assert finding(report, "feedline_what_if") is None
    assert "what-if" in report.summary() and "no native equivalent" in report.summary()


def test_unknown_loader_collate_and_dataset_give_their_reasons(small_images):
    slow_read = ImageFolder(small_images, transform=tf(), loader=SlowStorage(0.0))
    w = watched(DataLoader(slow_read, batch_size=8)).data["what_if"]
    assert not w["ran"] and "loader=SlowStorage" in w["reason"]
    collate = DataLoader(ImageFolder(small_images, transform=tf()), batch_size=8, collate_fn=SlowCollate(0.0))
    w = watched(collate).data["what_if"]
    assert not w["ran"] and "collate_fn=SlowCollate" in w["reason"]
    tensors = torch.utils.data.TensorDataset(torch.zeros(32, 3, 8, 8), torch.zeros(32))
    w = watched(DataLoader(tensors, batch_size=8)).data["what_if"]
    assert not w["ran"] and "TensorDataset is a dataset the doctor does not know" in w["reason"]
    no_tf = ImageFolder(small_images, transform=T.Compose([T.Resize(64), T.ToTensor()]))
    w = watched(DataLoader(no_tf, batch_size=8, collate_fn=lambda b: b)).data["what_if"]
    assert not w["ran"]


def test_what_if_off_and_bounded(small_images):
    ds = ImageFolder(small_images, transform=tf())
    report = watched(DataLoader(ds, batch_size=8), what_if=False)
    assert "what_if" not in report.data
    assert finding(report, "feedline_what_if") is None
    # A tiny bound still gives a rate (timed after the first batch), from a sample of what_if_files.
    report = watched(DataLoader(ds, batch_size=8), what_if_s=0.05, what_if_files=40)
    w = report.data["what_if"]
    assert w["ran"] and w["files"] == 40 and 0 < w["samples"] <= 5 * 40


def test_saved_report_rediagnoses_the_what_if(small_images, tmp_path):
    ds = ImageFolder(small_images, transform=tf())
    report = watched(DataLoader(ds, batch_size=8))
    path = tmp_path / "r.json"
    report.save_json(path)
    again = feedline.doctor.Report.from_json(str(path), rediagnose=True)
    assert [f["id"] for f in again.findings] == [f["id"] for f in report.findings]
    from feedline.doctor.evidence import WhatIf
    assert WhatIf.from_json(again.data["what_if"]).samples_per_s == report.data["what_if"]["samples_per_s"]
