"""Reports that agree with themselves (rules/common.py's windows): the
header, the findings and the tables show the same figure for the same
window, and name it; a loader with no headroom over the step is a risk.

On constructed evidence (test_doctor_rules.torch_loop), re-diagnosed as a
saved report is: exact, whatever the machine is doing."""
import copy
import re

from test_doctor_rules import torch_loop

import feedline


def flat(text):
    """The terminal summary without its line wrapping."""
    return " ".join(text.split())


def split_windows(ev, steady_rate=1957.0, steady_starv=0.01, whole_rate=1777.0, whole_starv=0.05):
    """The loop of `ev` with a whole run that differs from its steady state
    (a start-up that waited), as in a real report."""
    ev = copy.deepcopy(ev)
    ev["loop"].update({"steady_samples_per_s": steady_rate, "steady_starvation": steady_starv,
                       "samples_per_s": whole_rate, "starvation": whole_starv, "steps": 200,
                       "steady_steps": 191, "steady_window": "steps 10-200"})
    return ev


def test_header_findings_and_tables_show_one_window_per_figure():
    ev = split_windows(torch_loop(step=0.050))
    ev = with_capacity(ev, 3 * 1957.0, 1957.0)
    r = feedline.doctor.Report.from_json(ev, rediagnose=True)
    text, html = flat(r.summary()), r.html()
    label = "steady state, steps 10-200"
    # The header: the steady figures with their window, the whole run's with its own.
    assert f"1,957 samples/s ({label})" in text
    assert f"1% of the time waiting for data ({label})" in text
    assert re.search(r"whole run 200 steps.*1,777 samples/s, 5% waiting", text)
    # The findings: the same figure, the same window.
    f = next(f for f in r.findings if f["id"] == "step_bound")
    assert f"1% of the time ({label})" in f["summary"]
    # The HTML: headline and capacity table, the same figures and labels.
    assert "<b class=\"fed\">1%</b>" in html and label in html
    assert "1,957 samples/s" in html and "1,777 samples/s" in html
    assert f"loop, measured ({label})" in html
    # Old reports showed the whole run's 5% in the headline beside a finding's 1%.
    assert "<b class=\"fed\">5%</b>" not in html


def test_a_starved_loop_names_the_window_of_its_starvation_in_the_finding():
    ev = torch_loop(n=0, step=0.002)
    ev["loop"]["steady_window"] = "steps 2-100"
    r = feedline.doctor.Report.from_json(ev, rediagnose=True)
    f = r.findings[0]
    assert f["id"] == "num_workers_zero"
    assert "(steady state, steps 2-100)" in f["summary"]
    pct = re.search(r"(\d+)% of wall time goes to waiting", f["summary"]).group(1)
    assert f"{pct}% of the time waiting for data (steady state, steps 2-100)" in flat(r.summary())


def with_capacity(ev, loader, step):
    ev = copy.deepcopy(ev)
    ev["capacity"] = {"loop_samples_per_s": ev["loop"]["steady_samples_per_s"], "bound": "step",
                      "loader_samples_per_s": {"value": loader, "source": "measured"},
                      "step_samples_per_s": {"value": step, "source": "measured"}}
    return ev


def test_a_loader_at_one_times_the_step_demand_is_a_risk_not_input_is_fine():
    ev = torch_loop(step=0.050)
    demand = ev["loop"]["steady_samples_per_s"]
    r = feedline.doctor.Report.from_json(with_capacity(ev, 1.02 * demand, demand), rediagnose=True)
    ids = [f["id"] for f in r.findings]
    assert "step_bound" not in ids, ids
    f = next(f for f in r.findings if f["id"] == "loader_no_headroom")
    assert f["remedy"] == "risk" and f["severity"] == "medium"
    assert "1.02x" in f["title"] and "num_workers=" in f["fix"]
    assert f["evidence"]["headroom"] < 1.2


def test_a_loader_with_headroom_is_told_input_is_fine():
    ev = torch_loop(step=0.050)
    demand = ev["loop"]["steady_samples_per_s"]
    r = feedline.doctor.Report.from_json(with_capacity(ev, 3 * demand, demand), rediagnose=True)
    ids = [f["id"] for f in r.findings]
    assert "step_bound" in ids and "loader_no_headroom" not in ids
    f = next(f for f in r.findings if f["id"] == "step_bound")
    assert "3.0x what the step uses" in f["summary"]
