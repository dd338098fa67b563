"""feedline.doctor's rules (rules/) on the evidence of a real report, edited."""
import copy

import pytest

from feedline.doctor import rules


# -- rules on synthetic evidence ------------------------------------------------------------
def _evidence(report, **changes):
    ev = copy.deepcopy(report.data)
    ev.pop("findings", None)
    for path, value in changes.items():
        node = ev
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    return ev


def test_pin_memory_rule_fires_only_with_cuda_and_predicts_from_the_copy_times(report):
    assert not any(f["id"] == "pin_memory_off" for f in rules.diagnose(_evidence(report)))
    ev = _evidence(report, machine__cuda=True)
    # A step-bound loop whose step includes the copy, by construction: the
    # step is 4x one worker's whole batch as measured in this report (a busy
    # machine slows the workers; the ranking must not depend on it), and the
    # copies are a fixed share of the step.
    step = max(0.030, 4 * rules.TorchModel(ev).worker_batch()[0])
    ev["torch"]["h2d"] = {"pageable_s": 0.2 * step, "pinned_s": 0.05 * step, "pin_s": 0.02 * step}
    ev["loop"]["step_mean_s"] = step
    ev["loop"]["steady_starvation"] = 0.0
    ev["loop"]["steady_samples_per_s"] = rules.TorchModel(ev).rate()
    pin = next(f for f in rules.diagnose(ev) if f["id"] == "pin_memory_off")
    assert pin["predicted_speedup"] > 1.05 and "pin_memory=True" in pin["fix"]


def test_memory_pressure_names_copy_on_read_and_runs_out_first(report):
    ev = _evidence(report)
    ev["torch"]["memory"]["max_private_growth"] = 300 << 20
    f = next(f for f in rules.diagnose(ev) if f["id"] == "memory_pressure")
    assert "copy-on-read" in f["summary"] and "numpy" in f["fix"] and f["severity"] == "medium"
    ev["machine"]["mem_available_bytes"] = ev["machine"]["mem_total_bytes"] // 50
    assert rules.diagnose(ev)[0]["id"] == "memory_pressure"


def test_a_fix_that_removes_work_ranks_above_adding_processes_for_the_same_gain():
    work = {"id": "a", "severity": "high", "predicted_speedup": 2.0, "remedy": "removes_work"}
    more = {"id": "b", "severity": "high", "predicted_speedup": 2.1, "remedy": "parallelism"}
    assert [f["id"] for f in rules.rank([more, work])] == ["a", "b"]
    more["predicted_speedup"] = 3.0
    assert [f["id"] for f in rules.rank([more, work])] == ["b", "a"]


def test_model_rate_and_its_error_follow_from_the_reports_evidence(report):
    # How close the model comes to the measured rate is accuracy, reported by
    # bench/e2e/doctor_bench.py; here: the figures are the model's on this
    # report's own evidence, and the error is theirs.
    cap = report.data["capacity"]
    ev = _evidence(report)
    assert cap["model_samples_per_s"] == pytest.approx(rules.TorchModel(ev).rate(), rel=1e-12)
    assert cap["loop_samples_per_s"] == rules.current_rate(ev) > 0
    assert cap["model_error"] == pytest.approx(cap["model_samples_per_s"] / cap["loop_samples_per_s"] - 1, rel=1e-12)


def test_persistent_workers_needs_a_second_epoch(report):
    ev = _evidence(report)
    one = ev["loop"]["epoch_list"][0]
    one.update(first_batch_s=0.8, wall_s=2.0)
    ev["loop"]["epoch_list"] = [one]
    assert not any(f["id"] == "persistent_workers" for f in rules.diagnose(ev))
    ev["loop"]["epoch_list"] = [one, dict(one, index=1)]
    f = next(f for f in rules.diagnose(ev) if f["id"] == "persistent_workers")
    assert f["predicted_speedup"] > 1.1 and "only the first epoch" in f["summary"]
