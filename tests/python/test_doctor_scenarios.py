"""feedline.doctor on planted bottlenecks (python/feedline/doctor/, docs/doctor.md).

Each scenario is a real training loop (torchvision ImageFolder + transforms
over generated photographs, a torch DataLoader, a step) with one planted
cause. The doctor must measure the planted cost (a sleep is a lower bound of
what it measures) and name that cause with a fix whose evidence matches what
was planted; its prediction must exist, point the right way (faster than the
loop measured) and be what the model computes from the evidence recorded in
the same report (recomputed here, compared to float precision).

That the planted cause ranks *first* is a decision on measurements that a
busy machine moves (CPU work that releases the GIL, such as PIL's resize,
reads longer on a loaded 2-core machine, and can outrank a planted cost by a
little): it is asserted exactly on constructed evidence of each scenario in
test_doctor_rules.py. Here it is asserted only where the planted cost
dwarfs any such noise (the step-bound loop, worker start-up).

How close the prediction comes to a re-measurement of the fixed loop is
accuracy, not correctness, and a busy machine moves it: that is reported
by bench/e2e/doctor_bench.py (predicted vs measured, error per scenario),
not asserted here.

Planted costs are sleeps where CPU contention on a 2-core machine would make
the numbers flaky (the doctor sees a sleep as time blocked without CPU, like
a slow read); the decode-heavy and tiny-batch scenarios are CPU by nature.
Planted costs are large against the rest of the loop so that the ranking
holds on a busy machine too.
"""
import time

import pytest
import torch
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder

import feedline
from feedline.doctor import rules

from doctor_plants import Blurish, ColorJitterish, SetUpConnection, Sleep, SlowAugment, SlowCollate, SlowStorage, tf  # noqa: F401 (plants)

# More workers than cores is what some scenarios recommend, on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create")




# -- running and checking ------------------------------------------------------------
def diagnose(loader, step_s=0.0, epochs=1, per_sample_step_s=0.0):
    """Runs the loop under the doctor: each step sleeps step_s plus
    per_sample_step_s per sample. Returns the Report, its findings made
    again from its own measurements as on a machine to itself (see
    on_a_quiet_machine)."""
    with feedline.doctor.Doctor() as doctor:
        for _ in range(epochs):
            for images, _labels in doctor.watch(loader):
                time.sleep(step_s + per_sample_step_s * images.shape[0])
        return on_a_quiet_machine(doctor.report(file=None))


def on_a_quiet_machine(report):
    """The report re-diagnosed with no cores taken by other processes.

    Which fix ranks first rightly depends on the cores other processes left
    free during the run (machine.other_cpu_cores: on a busy machine more
    workers gain little, so a fix that removes work can outrank them). What
    the loop's own stages cost is measured without run-queue waits, so it
    does not depend on that load: the findings those costs call for on a
    machine to itself are what each scenario plants. (The decision on a busy
    machine is covered on constructed evidence, test_doctor_rules.py.)"""
    ev = evidence(report)
    ev["machine"] = dict(ev["machine"], other_cpu_cores=0.0)
    return feedline.doctor.Report.from_json(ev, rediagnose=True)


def first(report, expected):
    top = report.findings[0]
    assert top["id"] == expected, f"first finding {top['id']}, expected {expected}:\n{report.summary()}"
    return top


def named(report, expected):
    """The finding `expected`, which must be among the report's findings
    (its rank is printed: see the module docstring for why it is not
    asserted here)."""
    found = [f for f in report.findings if f["id"] == expected]
    assert found, f"no {expected} finding:\n{report.summary()}"
    print(f"{expected} ranked {found[0]['rank']} of {len(report.findings)}")
    return found[0]


def evidence(report):
    """The evidence the findings were made from: the report minus its findings."""
    ev = {k: v for k, v in report.data.items() if k != "findings"}
    return ev


# The prediction of each rule, recomputed from the evidence in the report
# (the measurements) and the finding's own evidence (what it says it cut).
RECOMPUTE = {
    "transform_bound": lambda m, e, ev: m.rate(sample_cut=e["per_sample_s"], sample_cut_cpu=e["cpu_s"]),
    "num_workers_zero": lambda m, e, ev: m.rate(n=e["recommended_workers"]),
    "too_few_workers": lambda m, e, ev: m.rate(n=e["recommended_workers"]),
    "storage_bound": lambda m, e, ev: m.rate(sample_cut=e["blocked_per_sample_s"]),
    "batch_too_small": lambda m, e, ev: m.rate(B=e["recommended_batch_size"]),
    "collate_bound": lambda m, e, ev: m.rate(collate=e["collate_reference_s"],
                                             collate_cpu=min(e["collate_reference_s"], m.collate_cpu_s)),
}


def check_prediction(report, top):
    """The top finding's prediction exists, is a gain over the rate the loop
    measured, and is what the model gives on this report's own evidence."""
    ev = evidence(report)
    pred, now = top["predicted_samples_per_s"], rules.current_rate(ev)
    assert pred and now > 0, top
    assert pred > now and top["predicted_speedup"] == pytest.approx(pred / now, abs=2e-3), (pred, now, top)
    # The same prediction again from the saved evidence alone...
    again = next(f for f in rules.diagnose(ev) if f["id"] == top["id"])
    assert again["predicted_samples_per_s"] == pred
    # ...and from the model, with the cut the finding names.
    if top["id"] in RECOMPUTE:
        expected = RECOMPUTE[top["id"]](rules.TorchModel(ev), top["evidence"], ev)
        assert pred == pytest.approx(expected, abs=1e-3), (pred, expected, top["evidence"])
    print(f"{top['id']}: {now:.0f} samples/s measured, {pred:.0f} predicted ({top['predicted_speedup']:.2f}x)")
    return top


# -- the eight scenarios -----------------------------------------------------------
# A sleep lasts at least as long as asked, and the doctor subtracts only the
# time spent waiting for a core after it: the planted cost is a lower bound
# of what the doctor must measure, on any machine (PLANTED: 1% for clock
# granularity).
PLANTED = 0.99


def test_slow_transform_is_named_and_its_removal_predicted(small_images):
    ds = ImageFolder(small_images, transform=tf(SlowAugment(0.008)))
    report = diagnose(DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True), step_s=0.010)
    top = check_prediction(report, named(report, "transform_bound"))
    assert top["evidence"]["transform"] == "SlowAugment" and "SlowAugment" in top["title"]
    assert top["evidence"]["per_sample_s"] >= PLANTED * 0.008


def test_decode_heavy_dataset_suggests_smaller_images_and_predicts_the_gain(large_images):
    ds = ImageFolder(large_images, transform=tf())
    report = diagnose(DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True), step_s=0.010)
    top = check_prediction(report, named(report, "decode_bound"))
    assert top["evidence"]["suggested_short_side"] == 74  # 1.15 x the 64 px output
    assert "reduced scale" in top["fix"] and "74px" in top["fix"]


def test_num_workers_zero_recommends_workers_and_predicts_the_gain(small_images):
    ds = ImageFolder(small_images, transform=tf())
    report = diagnose(DataLoader(ds, batch_size=32, num_workers=0), step_s=0.015)
    top = check_prediction(report, named(report, "num_workers_zero"))
    k = top["evidence"]["recommended_workers"]
    assert 1 <= k <= 4 and f"num_workers={k}" in top["fix"]


def test_too_few_workers_for_spread_latency_and_predicts_the_gain(small_images):
    # No single cost dominates (a slowish read and two slowish augmentations):
    # more workers is the fix, not any one stage.
    ds = ImageFolder(small_images, transform=tf(ColorJitterish(0.001), Blurish(0.001)), loader=SlowStorage(0.001))
    report = diagnose(DataLoader(ds, batch_size=8, num_workers=1, persistent_workers=True), step_s=0.004)
    top = check_prediction(report, named(report, "too_few_workers"))
    k = top["evidence"]["recommended_workers"]
    assert k > 1 and f"num_workers={k}" in top["fix"]


def test_storage_delay_suggests_packing_and_predicts_the_gain(small_images):
    ds = ImageFolder(small_images, transform=tf(), loader=SlowStorage(0.006))
    report = diagnose(DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True), step_s=0.006)
    top = check_prediction(report, named(report, "storage_bound"))
    assert "feedline pack" in top["fix"]
    assert top["evidence"]["count"] == 256  # files behind the ImageFolder
    # The read's blocked time is the sample's less what its transforms
    # report, and on a busy machine a transform's timing takes some of it
    # (seen: 5.2-5.6 ms of the 6 planted at load 15 on 2 cores): the check is
    # that it is measured and of the planted size, not its accuracy.
    assert top["evidence"]["blocked_per_sample_s"] >= 0.5 * 0.006


def test_tiny_batch_costs_are_measured_and_a_larger_batch_predicted_consistently(small_images):
    # batch_size=1 with four workers reading from slowish storage: each batch's
    # fixed costs (pickling, sharing tensors, receiving) outweigh its sample.
    ds = ImageFolder(small_images, transform=tf(), loader=SlowStorage(0.002))
    report = diagnose(DataLoader(torch.utils.data.Subset(ds, range(256)), batch_size=1, num_workers=4,
                                 persistent_workers=True))
    # Per-batch costs here are CPU work (pickling, sharing tensors,
    # receiving), which a busy machine stretches on both sides of the IPC:
    # whether a larger batch gains enough to be reported is then a close
    # call (seen at load 15: "input is fine, the wait is receiving"). What
    # must hold is that those costs were measured, and that a finding, when
    # made, is consistent; that it is made and ranks first for such costs is
    # asserted on constructed evidence (test_doctor_rules.py).
    bt = report.data["torch"]["batch"]
    assert bt["worker_hidden_cpu_s"] > 0 and bt["receive_s"] > 0
    assert report.data["torch"]["sample"]["blocked_s"] >= 0.9 * 0.002
    found = [f for f in report.findings if f["id"] == "batch_too_small"]
    if found:
        top = check_prediction(report, found[0])
        b = top["evidence"]["recommended_batch_size"]
        assert b >= 2 and f"batch_size={b}" in top["fix"]


def test_slow_collate_is_named_and_the_default_predicted(small_images):
    ds = ImageFolder(small_images, transform=tf())
    # A 1 ms step against 12.5 ms of collate per batch and worker: input-bound
    # even when a busy machine stretches the step's sleep several-fold (a
    # 6 ms step was seen at 35 ms under load 15, making the loop step-bound).
    report = diagnose(DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True,
                                 collate_fn=SlowCollate(0.025)), step_s=0.001)
    top = check_prediction(report, named(report, "collate_bound"))
    assert "SlowCollate" in top["title"]
    # default_collate timed on the same samples: far below the planted 25 ms.
    ref = top["evidence"]["collate_reference_s"]
    assert ref is not None and ref < top["evidence"]["collate_s"]
    assert top["evidence"]["collate_s"] >= PLANTED * 0.025


def test_step_bound_loop_says_the_input_is_fine(small_images):
    ds = ImageFolder(small_images, transform=tf())
    # A 50 ms step against ~1 ms of loading per sample: the workers idle most
    # of the time even when a busy machine slows them several-fold.
    report = diagnose(DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True), step_s=0.050)
    top = first(report, "step_bound")
    assert "Input is fine" in top["title"]
    # What waiting there is, is receiving batches (torch's IPC), not making them.
    assert report.data["torch"]["workers"]["utilisation"] < 0.5
    assert report.data["capacity"]["bound"] == "step"
    # No fix that names an input-side cause claims a real gain.
    causes = [f for f in report.findings if f["id"] != "feedline_what_if"]
    assert all((f["predicted_speedup"] or 1.0) < 1.15 for f in causes), report.summary()
    # The what-if (an alternative, not a cause) is capped by the step: all it
    # can claim is the loop's wait for batches, and on a VM that wait includes
    # waking up after each step's sleep, which feedline would pay too (on
    # 2026-12-06 a bare torch call after a 2 s sleep took 10-17 ms here, and
    # the wait reached 15% of this 50 ms step).
    for f in report.findings:
        if f["id"] == "feedline_what_if":
            assert f["evidence"]["capped_by_step"], f
            # (the report rounds predictions to 0.001 samples/s)
            assert f["predicted_samples_per_s"] <= f["evidence"]["step_samples_per_s"] + 1e-3, f


# -- beyond the eight ----------------------------------------------------------------
def test_worker_start_up_each_epoch_recommends_persistent_workers(small_images):
    ds = ImageFolder(small_images, transform=tf())
    init = SetUpConnection(0.3)
    subset = torch.utils.data.Subset(ds, range(96))
    report = diagnose(DataLoader(subset, batch_size=8, num_workers=2, worker_init_fn=init), step_s=0.005, epochs=2)
    top = first(report, "persistent_workers")
    e = top["evidence"]
    # worker_init_fn sleeps 0.3 s: at least that is measured (the upper bound
    # only says it is that call that was timed, not the whole epoch).
    assert 0.3 * PLANTED <= e["worker_init_s"] < e["epoch_s"]
    assert "persistent_workers=True" in top["fix"]
    # The prediction, recomputed from the epochs in the report: the same
    # epochs without the start-up each one paid.
    epochs = [x for x in report.data["loop"]["epoch_list"] if x["first_batch_s"] is not None and x["steps"] > 0]
    assert e["first_batch_s"] == [x["first_batch_s"] for x in epochs] and len(epochs) == 2
    samples = sum(x["samples"] for x in epochs) / len(epochs)
    assert e["epoch_s"] == pytest.approx(sum(x["wall_s"] for x in epochs) / len(epochs), rel=1e-12)
    assert 0 < e["startup_s"] < e["epoch_s"]
    assert top["predicted_samples_per_s"] == pytest.approx(samples / (e["epoch_s"] - e["startup_s"]), abs=1e-3)
    assert top["predicted_speedup"] == pytest.approx(e["epoch_s"] / (e["epoch_s"] - e["startup_s"]), abs=2e-3)
    assert top["predicted_speedup"] > 1.1
    # The start-up is each first batch beyond one batch's making, as measured.
    latency, _ = rules.TorchModel(evidence(report)).worker_batch()
    over = [max(0.0, fb - latency) for fb in e["first_batch_s"]]
    assert e["startup_s"] == pytest.approx(sum(over) / len(over), rel=1e-12)


class Catalogue(ImageFolder):
    """An ImageFolder that also keeps a caption per sample in a Python list,
    and scans it once in each process (as a lookup table would be built)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.captions = [f"caption {i}" for i in range(1_500_000)]
        self.scanned = False

    def __getitem__(self, index):
        if not self.scanned:
            self.scanned = True
            for _ in self.captions:  # reference counting writes to every object
                pass
        return super().__getitem__(index)


def test_copy_on_read_growth_in_workers_is_reported(small_images):
    ds = torch.utils.data.Subset(Catalogue(small_images, transform=tf()), range(64))
    report = diagnose(DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True), step_s=0.002)
    f = next(f for f in report.findings if f["id"] == "memory_pressure")
    assert f["evidence"]["max_private_growth_bytes"] > 64 << 20
    assert "copy-on-read" in f["summary"] and "numpy" in f["fix"]


def test_feedline_loader_with_one_thread_is_told_to_use_the_cores(small_images):
    # A CPU-bound loader on one thread; the step is free.
    with feedline.Loader(small_images, batch_size=16, num_threads=1,
                         transform=feedline.transforms.imagenet_train(160)) as loader:
        with feedline.doctor.Doctor() as doctor:
            for _ in range(2):
                for _batch in doctor.watch(loader):
                    pass
            report = doctor.report(file=None)
    f = report.data["feedline"]
    assert {o["name"] for o in f["ops"]} >= {"read", "decode_transform"}
    # How much of its time the thread spends inside samples depends on how
    # often a busy machine takes its core between them; it is never more
    # than all of it.
    assert 0 < f["utilisation"] <= 1 + 1e-9
    assert report.data["loop"]["starvation"] > 0.5  # the step is free: the loop waits for the loader
    # Whether a second thread helps depends on the cores other processes
    # left free during the run (machine.other_cpu_cores): on a busy machine
    # the doctor rightly says it would not. The same measurements on a
    # machine to themselves must call for one thread per core.
    ev = evidence(report)
    ev["machine"]["other_cpu_cores"] = 0.0
    findings = rules.diagnose(ev)
    top = findings[0]
    cores = report.data["machine"]["cores"]
    assert top["id"] == "too_few_workers", [x["id"] for x in findings]
    assert top["evidence"]["recommended_threads"] == cores and f"num_threads={cores}" in top["fix"]
    assert top["predicted_samples_per_s"] > rules.current_rate(ev)


def test_feedline_loader_feeding_a_slow_step_is_fine(small_images):
    # 60 ms per step of 16 samples (at most 267 samples/s) against two
    # threads that make thousands a second: the loader keeps up even when a
    # busy machine slows it several-fold.
    with feedline.Loader(small_images, batch_size=16, num_threads=2,
                         transform=feedline.transforms.imagenet_eval(64, resize=73)) as loader:
        with feedline.doctor.Doctor() as doctor:
            for _batch in doctor.watch(loader):
                time.sleep(0.06)
            report = doctor.report(file=None)
    first(report, "step_bound")
    # The loader's capacity, from the model on the report's own evidence.
    cap = report.data["capacity"]["loader_samples_per_s"]
    assert cap["source"] == "model"
    ev = evidence(report)
    m = rules.FeedlineModel(ev)
    m.step_s = 0.0
    assert cap["value"] == pytest.approx(m.rate(), rel=1e-9)
    # 16 samples per >= 60 ms step: the step takes at most 267 samples/s.
    assert report.data["loop"]["samples_per_s"] <= 16 / 0.06
