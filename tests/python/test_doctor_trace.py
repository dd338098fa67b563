"""feedline.doctor's Chrome / Perfetto trace (trace.py)."""
import json

import pytest

import feedline


# -- trace -----------------------------------------------------------------------------
def test_trace_has_wait_and_step_spans_per_step_and_the_workers_stages(report, tmp_path):
    path = tmp_path / "t.json"
    report.save_trace(path)
    trace = json.loads(path.read_text())
    assert feedline.doctor.validate_trace(trace)
    ev = trace["traceEvents"]
    waits = [e for e in ev if e["ph"] == "X" and e["name"] == "data wait"]
    steps = [e for e in ev if e["ph"] == "X" and e["name"] == "step"]
    assert len(waits) == len(steps) == 24
    for w, s in zip(waits, steps):  # a step starts when its wait ends
        assert s["ts"] == pytest.approx(w["ts"] + w["dur"], abs=1.0)
    loader = [e for e in ev if e.get("pid") == 2 and e["ph"] == "X"]
    cats = {e["cat"] for e in loader}
    assert {"getitem", "transform", "collate"} <= cats
    assert sum(1 for e in loader if e["cat"] == "getitem") == 192
    lanes = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == 2}
    assert len([l for l in lanes if l.startswith("worker")]) == 4  # 2 workers x 2 epochs (not persistent)
    # Worker spans sit inside the loop's time line (one clock for every process).
    end = max(w["ts"] + w["dur"] for w in steps)
    assert all(-1e5 < e["ts"] < end for e in loader)


@pytest.mark.parametrize("bad", [
    {"events": []},
    {"traceEvents": [{"name": "x", "ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": -1}]},
    {"traceEvents": [{"name": "x", "ph": "Q", "pid": 1}]},
])
def test_validate_trace_rejects_malformed_traces(bad):
    with pytest.raises(ValueError):
        feedline.doctor.validate_trace(bad)
