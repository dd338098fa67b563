"""The doctor on a feedline Loader whose Compose has Python members
(docs/python_ops.md): each op shown as native or Python with its busy time,
GIL wait and GIL held (evidence, text, HTML, JSON), and the
python_ops_dominate rule (docs/doctor.md). Criteria are structural: which ops
are Python, the GIL-held share from the loader's own counters against the
rule's threshold, what the fix names; no timing thresholds."""
import copy
import json
import time

import pytest
import torchvision.transforms as T

import feedline
from feedline.doctor import evidence, rules
from feedline.doctor.feedline_loader import python_members
from feedline.doctor.rules import common as rc

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


class SpinInPython:
    """A planted slow user op: spins in Python (holding the GIL) for 3 ms per
    image, about 30x the native work on a 72 px image."""

    def __call__(self, img):
        end = time.perf_counter() + 3e-3
        while time.perf_counter() < end:
            pass
        return img


@pytest.fixture(scope="module")
def python_report(small_images):
    tf = T.Compose([T.RandomResizedCrop(48), SpinInPython(), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize(MEAN, STD)])
    loader = feedline.Loader(small_images, batch_size=16, num_threads=2, transform=tf)
    try:
        with feedline.doctor.Doctor() as doctor:
            for _batch in doctor.watch(loader):
                pass
        return doctor.report()
    finally:
        loader.close()


def test_each_op_is_shown_native_or_python_with_its_gil_times(python_report):
    ops = python_report.data["feedline"]["ops"]
    py = [o for o in ops if o["python"]]
    assert [o["name"] for o in py] == ["python:SpinInPython+RandomHorizontalFlip"], ops
    assert py[0]["gil_held_s"] > 0 and py[0]["gil_wait_s"] >= 0 and py[0]["items"] > 0
    native = [o for o in ops if not o["python"]]
    assert {"read", "decode_transform", "to_tensor"} <= {o["name"] for o in native}
    assert all("gil_held_s" not in o and "gil_wait_s" not in o for o in native)
    where = {s["name"]: s["where"] for s in python_report.data["stages"]}
    assert where[py[0]["name"]] == "python" and where["decode_transform"] == "engine"


def test_the_gil_held_share_is_far_above_the_threshold_and_the_rule_says_so(python_report):
    f = next(x for x in python_report.findings if x["id"] == "python_ops_dominate")
    ev = f["evidence"]
    assert ev["python_ops"] == ["python:SpinInPython+RandomHorizontalFlip"]
    # The planted op is ~30x the native work: its held share is far above 50%.
    assert ev["gil_held_share"] > rc.PYTHON_OPS_DOMINATE + 0.2, ev
    assert f"{100 * ev['gil_held_share']:.0f}%" in f["summary"]
    # The user op has no native equivalent: worker processes first, with the
    # rate the model predicts once the Python part is no longer serial, then
    # what else is available.
    assert "python_workers=" in f["fix"] and ev["recommended_python_workers"] >= 2
    assert "SpinInPython" in f["fix"] and "batch_map=" in f["fix"]
    # RandomHorizontalFlip is native elsewhere: the fix says to move it.
    assert "RandomHorizontalFlip natively" in f["fix"]
    assert f["predicted_samples_per_s"] is not None
    members = {m["name"]: m for m in ev["python_members"]}
    assert members["RandomHorizontalFlip"]["native"] and not members["SpinInPython"]["native"]
    assert " object at 0x" not in f["fix"]  # named by its class, not by a repr with an address


def test_the_text_html_and_json_reports_show_the_python_op(python_report):
    text = python_report.summary()
    line = next(l for l in text.splitlines() if "python:SpinInPython" in l and "GIL wait" in l)
    assert "Python" in line and "held" in line
    assert any("decode_transform" in l and "native" in l for l in text.splitlines())
    html = python_report.html()
    assert 'id="feedline-ops"' in html and "<td>Python</td>" in html and "<td>native</td>" in html
    data = json.loads(json.dumps(python_report.data))
    ev = evidence.Evidence.from_json({k: v for k, v in data.items() if k != "findings"})
    op = next(o for o in ev.feedline.ops if o.python)
    assert isinstance(op, evidence.OpTimes) and op.gil_held_s == data["feedline"]["ops"][
        [o["name"] for o in data["feedline"]["ops"]].index(op.name)]["gil_held_s"]
    again = feedline.doctor.Report.from_json(copy.deepcopy(data), rediagnose=True)
    assert "python_ops_dominate" in [x["id"] for x in again.findings]


def test_python_members_name_the_torchvision_ones_feedline_runs_natively():
    class Cheap:
        def __call__(self, img):
            return img
    tf = T.Compose([T.RandomResizedCrop(32), Cheap(), T.RandomHorizontalFlip(), T.ToTensor()])
    t = feedline.loader._native_transform(tf, strict=False)[1]
    got = [(m["position"], m["name"], m["torchvision"], m["native"]) for m in python_members(t)]
    assert got == [("1", "Cheap", None, False), ("2", "RandomHorizontalFlip", "RandomHorizontalFlip", True)]
    assert python_members(None) == []
    assert python_members(feedline.loader._native_transform(
        T.Compose([T.RandomResizedCrop(32), T.ToTensor()]), strict=False)[1]) == []


# -- the rule on evidence (re-diagnosed, as a saved report) ---------------------------------
def loop_with_python_op(held_s, native_s=0.2e-3, wait_s=0.0, members=None, threads=2, cores=2, B=16):
    uptime = 1.0
    per = native_s + held_s + wait_s
    samples = int(threads * uptime / per)
    ops = [{"name": "read", "items": samples, "busy_s": samples * native_s * 0.1, "errors": 0,
            "per_item_s": native_s * 0.1, "python": False},
           {"name": "decode_transform", "items": samples, "busy_s": samples * native_s * 0.9, "errors": 0,
            "per_item_s": native_s * 0.9, "python": False},
           {"name": "python:Op", "items": samples, "busy_s": samples * (held_s + wait_s), "errors": 0,
            "per_item_s": held_s + wait_s, "python": True, "gil_wait_s": samples * wait_s,
            "gil_held_s": samples * held_s}]
    return {
        "schema": "feedline.doctor.report", "schema_version": 1, "mode": "loop",
        "loader": {"kind": "feedline", "type": "Loader", "batch_size": B,
                   "settings": {"num_threads": threads, "batch_size": B,
                                "python_members": members if members is not None else
                                [{"position": "1", "name": "Op", "member": "Op()", "torchvision": None,
                                  "native": False}]}},
        "machine": {"cores": cores, "cpu": "x86_64", "cuda": False, "gpu": None,
                    "mem_total_bytes": 32 << 30, "mem_available_bytes": 24 << 30, "other_cpu_cores": 0.0},
        "loop": {"steps": samples // B, "samples": samples, "epochs": 1, "wall_s": uptime, "wait_s": 0.9,
                 "starvation": 0.9, "samples_per_s": samples / uptime, "step_mean_s": 0.0,
                 "step_cpu_mean_s": 0.0, "device": None, "epoch_list": []},
        "torch": None,
        "feedline": {"num_threads": threads, "uptime_s": uptime, "ops": ops, "samples": samples,
                     "busy_s": threads * uptime, "wait_input_s": 0.0, "blocked_output_s": 0.0,
                     "utilisation": 1.0, "consumer_wait_s": 0.9, "ring": {},
                     "errors": {"total": 0, "skipped": 0}, "tuner": None, "source_kind": "folder",
                     "exact_decode": False},
    }


def ids(ev):
    return [f["id"] for f in feedline.doctor.Report.from_json(copy.deepcopy(ev), rediagnose=True).findings]


def test_the_rule_fires_only_above_its_share_and_gil_waits_are_not_work():
    assert "python_ops_dominate" in ids(loop_with_python_op(held_s=2e-3))
    assert "python_ops_dominate" not in ids(loop_with_python_op(held_s=0.1e-3))
    # A large wait for the GIL with little held: waiting is not Python's work.
    assert "python_ops_dominate" not in ids(loop_with_python_op(held_s=0.1e-3, wait_s=5e-3))


def test_a_loader_that_is_not_the_bound_is_left_alone():
    ev = loop_with_python_op(held_s=2e-3)
    ev["loop"].update(wait_s=0.01, starvation=0.01, step_mean_s=0.05)
    assert "python_ops_dominate" not in ids(ev)


def test_a_native_member_stuck_in_python_gets_a_move_and_a_predicted_gain():
    members = [{"position": "2", "name": "RandomHorizontalFlip", "member": "RandomHorizontalFlip(p=0.5)",
                "torchvision": "RandomHorizontalFlip", "native": True}]
    report = feedline.doctor.Report.from_json(loop_with_python_op(held_s=2e-3, members=members),
                                              rediagnose=True)
    f = next(x for x in report.findings if x["id"] == "python_ops_dominate")
    assert "move it before the first Python member" in f["fix"] and "batch_map" not in f["fix"]
    assert f["predicted_speedup"] and f["predicted_speedup"] > rules.SIGNIFICANT


def test_more_threads_are_not_promised_past_the_serial_python_floor():
    # One thread, two cores, Python holding 90% of a sample: a second thread
    # cannot double the rate (the GIL-held part is serial).
    ev = loop_with_python_op(held_s=1.8e-3, threads=1)
    report = feedline.doctor.Report.from_json(ev, rediagnose=True)
    more = [f for f in report.findings if f["id"] == "too_few_workers"]
    assert not more or more[0]["predicted_speedup"] < 1.2, more
    assert report.findings[0]["id"] == "python_ops_dominate"


def test_python_workers_are_recommended_with_a_gain_and_not_when_already_used():
    ev = loop_with_python_op(held_s=2e-3, threads=4, cores=8)
    # Measured as the GIL lets it run: one Python op at a time.
    ev["loop"]["samples_per_s"] = 1 / 2e-3
    report = feedline.doctor.Report.from_json(copy.deepcopy(ev), rediagnose=True)
    f = next(x for x in report.findings if x["id"] == "python_ops_dominate")
    assert "python_workers=" in f["fix"]
    assert f["predicted_speedup"] and f["predicted_speedup"] > rules.SIGNIFICANT
    # Already in processes: the op reports no GIL time, the rule is silent,
    # and python_workers= is never recommended again.
    ev["loader"]["settings"]["python_workers"] = 4
    for o in ev["feedline"]["ops"]:
        if o.get("python"):
            o.pop("gil_held_s", None)
            o.pop("gil_wait_s", None)
            o["processes"] = 4
    again = feedline.doctor.Report.from_json(copy.deepcopy(ev), rediagnose=True)
    assert all("python_workers=" not in (x.get("fix") or "") for x in again.findings)
