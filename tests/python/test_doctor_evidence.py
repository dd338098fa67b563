"""feedline.doctor's evidence model (evidence.py), the probe registry
(watch.PROBE_KINDS, probes.Probe) and the rule registry (rules/registry.py):
the records own the report's JSON keys, and each kind's rules run in order."""
import copy
import dataclasses
import json

import pytest
import torch
from torch.utils.data import DataLoader

import feedline
from feedline import _C
from feedline.doctor import evidence, probes, rules
from feedline.doctor._torch_compat import dataset_chain
from feedline.doctor.feedline_loader import FeedlineProbe
from feedline.doctor.torch_loader import TorchProbe
from feedline.doctor.watch import NullProbe, probe_for


def _record_keys(record, data, where):
    """Checks that `data` (a section's JSON) has only the record's keys, in
    the record's order, recursing into nested records."""
    keys = type(record).keys()
    assert list(data) == [k for k in keys if k in data], f"{where}: {list(data)} not in the order {keys}"
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if isinstance(value, evidence.Record):
            _record_keys(value, data[f.name], f"{where}.{f.name}")
        elif isinstance(value, list):
            for i, v in enumerate(value):
                if isinstance(v, evidence.Record):
                    _record_keys(v, data[f.name][i], f"{where}.{f.name}[{i}]")


@pytest.fixture(scope="module")
def feedline_evidence(small_images):
    loader = feedline.Loader(small_images, batch_size=16, num_threads=1,
                             transform=feedline.transforms.imagenet_eval(64, resize=73))
    try:
        with feedline.doctor.Doctor() as doctor:
            for _batch in doctor.watch(loader):
                pass
            return doctor.evidence()
    finally:
        loader.close()


def test_evidence_round_trips_through_json_with_the_records_keys(report, feedline_evidence):
    for data in (report.data, feedline_evidence):
        data = json.loads(json.dumps(data))  # as saved
        ev = evidence.Evidence.from_json(data)
        assert isinstance(ev.machine, evidence.Machine) and isinstance(ev.loop, evidence.Loop)
        assert all(isinstance(e, evidence.Epoch) for e in ev.loop.epoch_list)
        assert ev.to_json() == data
        _record_keys(ev, data, "report")
    ev = evidence.Evidence.from_json(json.loads(json.dumps(report.data)))
    assert isinstance(ev.torch.batch, evidence.BatchTimes) and ev.feedline is None
    assert [t.name for t in ev.torch.transforms][2] == "SlowAugment"
    assert all(isinstance(w, evidence.WorkerRecord) for w in ev.torch.workers.list)
    fl = evidence.Evidence.from_json(feedline_evidence)
    assert isinstance(fl.feedline.tuner, evidence.Tuner) and fl.torch is None
    assert [o.name for o in fl.feedline.ops] == [o["name"] for o in feedline_evidence["feedline"]["ops"]]


def test_a_pipeline_report_round_trips_and_leaves_out_the_loop_sections(small_images):
    from feedline.doctor import pipeline
    data = pipeline.scan(small_images, threads=(1,), batch_size=16, transform="eval", size=64, batches=2)
    saved = json.loads(json.dumps(data))  # (the summary's efficiency is keyed by thread count: strings in JSON)
    ev = evidence.Evidence.from_json(saved)
    assert isinstance(ev.scan[0], evidence.ScanRun) and isinstance(ev.scan[0].stages[0], evidence.StageTime)
    assert ev.to_json() == saved
    assert "loop" not in data and "timeline" not in data and "other_cpu_cores" not in data["machine"]
    assert list(data["capacity"]) == ["loop_samples_per_s", "bound", "loader_samples_per_s", "step_samples_per_s"]


def test_from_json_names_the_field_it_does_not_know_or_misses(report):
    data = copy.deepcopy(report.data)
    data["loop"]["epoch_list"][1]["no_such_field"] = 1
    with pytest.raises(ValueError, match=r"Evidence\.loop\.epoch_list\[1\]: unknown field 'no_such_field'"):
        evidence.Evidence.from_json(data)
    data = copy.deepcopy(report.data)
    del data["torch"]["batch"]["collate_s"]
    with pytest.raises(ValueError, match=r"Evidence\.torch\.batch: missing 'collate_s'"):
        evidence.Evidence.from_json(data)


def test_an_absent_field_is_left_out_and_null_is_kept():
    files = evidence.Files()
    assert files.to_json() == {} and evidence.Files.from_json({}).count is evidence.ABSENT
    w = evidence.WorkerRecord(pid=1, worker=0, batches=2, busy_s=0.5)
    assert w.to_json() == {"pid": 1, "worker": 0, "batches": 2, "busy_s": 0.5}
    m = evidence.Machine(cores=2, cpu="x", other_cpu_cores=None)
    assert m.to_json()["other_cpu_cores"] is None


def test_steady_state_leaves_out_each_epochs_warmup_but_keeps_three_quarters_of_a_short_one():
    assert evidence.warmup_steps(skip=3, epoch_steps=100) == 3
    assert evidence.warmup_steps(skip=3, epoch_steps=8) == 2
    assert evidence.warmup_steps(skip=3, epoch_steps=2) == 1
    assert evidence.steady_mask([0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1], skip=2) == \
        [False, True, True, True, False, False, True, True, True, True, True, True]


def test_each_loader_kind_gets_its_probe_by_type():
    class NotALoader:  # a class named like a probe's loader is not one
        pass
    NotALoader.__name__ = "DataLoader"
    loader = DataLoader([torch.zeros(1)] * 4, batch_size=2)
    assert type(probe_for(loader)) is TorchProbe and TorchProbe.kind == "torch"
    assert type(probe_for(NotALoader())) is NullProbe and NullProbe.kind == "iterable"
    assert type(probe_for([1, 2])) is NullProbe and FeedlineProbe.kind == "feedline"
    members = [m for m in vars(probes.Probe) if not m.startswith("_")]
    for cls in (TorchProbe, FeedlineProbe, NullProbe):
        assert all(callable(getattr(cls, m)) or m == "kind" for m in members), cls


def test_each_kinds_rules_run_in_the_documented_order():
    assert [r.__name__ for r in rules.rules_for("torch")] == [
        "_num_workers_zero", "_too_few_workers", "_persistent_workers", "_pin_memory_off", "_decode_bound",
        "_transform_bound", "_storage_bound", "_collate_bound", "_batch_too_small", "_memory_pressure"]
    assert [r.__name__ for r in rules.rules_for("feedline")] == [
        "_fl_too_few_threads", "_fl_storage_bound", "_fl_decode_bound", "_fl_python_ops_dominate"]
    assert rules.model_for("torch") is rules.TorchModel and rules.model_for("feedline") is rules.FeedlineModel
    assert rules.rules_for("iterable") == [] and rules.run_rules("iterable", {}) == []


def test_the_fair_share_of_the_cores_is_one_formula():
    # 4 cores, 2 taken by others: 2 left, but 3 runnable threads of ours
    # against 2 of theirs get 3/5 of the machine.
    assert rules.fair_share_cores(4, 2.0, 3) == pytest.approx(2.4)
    assert rules.fair_share_cores(4, 0.0, 1) == 4


def test_the_dataset_walker_follows_dataset_at_most_four_deep():
    class Wrap:
        def __init__(self, inner):
            self.dataset = inner
    chain = Wrap(Wrap(Wrap(Wrap(Wrap("base")))))
    assert len(list(dataset_chain(chain))) == 4
    assert list(dataset_chain(Wrap("base")))[1] == "base" and list(dataset_chain(None)) == []


def test_the_doctor_counts_cores_as_the_engine_does():
    assert feedline.doctor.Doctor().cores == _C.available_cores()
