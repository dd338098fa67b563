"""feedline.doctor's JSON report (_report.py, evidence.py; docs/doctor.md
"JSON schema"): the schema, every field documented, validate()."""
import copy
import json
import re

import pytest

import feedline

from doctor_plants import documented_paths, undocumented  # noqa: F401 (fixtures)


# -- JSON ------------------------------------------------------------------------------
def test_json_report_follows_the_schema_and_round_trips(report, tmp_path):
    assert feedline.doctor.validate(report.data)
    path = tmp_path / "r.json"
    report.save_json(path)
    data = json.loads(path.read_text())
    assert feedline.doctor.validate(data)
    assert data["schema"] == "feedline.doctor.report" and data["schema_version"] == feedline.doctor.SCHEMA_VERSION
    assert data["mode"] == "loop" and data["loader"]["kind"] == "torch"
    loop = data["loop"]
    assert loop["steps"] == 24 and loop["samples"] == 192 and loop["epochs"] == 2
    assert [e["steps"] for e in loop["epoch_list"]] == [12, 12]
    assert loop["wall_s"] == pytest.approx(loop["wait_s"] + loop["step_s"])
    assert len(data["timeline"]["rows"]) == 24
    starts = [r[0] for r in data["timeline"]["rows"]]
    assert starts == sorted(starts)
    names = [t["name"] for t in data["torch"]["transforms"]]
    assert names[2] == "SlowAugment"
    assert data["torch"]["transforms"][2]["wall_s"] >= 0.004
    assert data["loader"]["settings"]["num_workers"] == 2
    # The same findings again from the saved JSON alone: the rules need nothing else.
    again = feedline.doctor.Report.from_json(str(path), rediagnose=True)
    assert [f["id"] for f in again.findings] == [f["id"] for f in report.findings]


@pytest.fixture(scope="module")
def feedline_report(small_images):
    loader = feedline.Loader(small_images, batch_size=16, num_threads=1,
                             transform=feedline.transforms.imagenet_eval(64, resize=73))
    try:
        with feedline.doctor.Doctor() as doctor:
            for _batch in doctor.watch(loader):
                pass
            return doctor.report(file=None)
    finally:
        loader.close()


def test_every_report_field_is_documented(report, feedline_report, small_images):
    from feedline.doctor import pipeline
    assert report.data["torch"] and feedline_report.data["feedline"]
    assert feedline_report.data["feedline"].get("tuner"), "this build's stats() has no tuner section"
    scan = pipeline.scan(small_images, threads=(1,), batch_size=16, transform="eval", size=64, batches=2,
                         target_rate=100)
    for data in (report.data, feedline_report.data, scan):
        missing = undocumented(data)
        assert not missing, f"fields missing from docs/doctor.md's JSON schema ({data['mode']}, " \
                            f"{data['loader']['kind']}): {missing}"


def test_the_documented_fields_check_sees_nesting():
    # The check above is only as good as its parser: a field under the wrong
    # parent, or one named nowhere, must count as undocumented.
    assert {"loop.device.idle_s", "torch.workers.list.pid", "capacity.step_samples_per_s.source",
            "torch.sample.blocked_s", "torch.load.blocked_s", "feedline.tuner.ring_depth"} <= documented_paths()
    assert undocumented({"loop": {"device": {"busy_s": 1.0}}, "torch": {"sample": {"pid": 1}}}) == \
        ["torch.sample.pid"]
    assert undocumented({"feedline": {"no_such_field": 1}}) == ["feedline.no_such_field"]


@pytest.mark.parametrize("breakage,message", [
    (lambda d: d.pop("loop"), "missing 'loop'"),
    (lambda d: d.update(schema_version=99), "schema_version"),
    (lambda d: d["loop"].update(starvation=1.5), "starvation"),
    (lambda d: d["findings"][0].update(rank=7), "rank"),
    (lambda d: d["findings"][0].update(severity="dire"), "severity"),
    (lambda d: d["timeline"]["rows"].append([1.0, "x", 0.0, 1, 0]), "timeline.rows"),
    (lambda d: d["machine"].update(cores="two"), "cores"),
])
def test_validate_names_what_breaks_the_schema(report, breakage, message):
    data = copy.deepcopy(report.data)
    breakage(data)
    with pytest.raises(ValueError, match=re.escape(message)):
        feedline.doctor.validate(data)
