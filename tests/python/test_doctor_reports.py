"""feedline.doctor's reports and mechanics (python/feedline/doctor/,
docs/doctor.md): the JSON schema, the Chrome trace, the HTML report rendered
in headless Chromium, the terminal summary, the rules on synthetic evidence,
and what watch() does to (and gives back to) a DataLoader."""
import copy
import json
import pathlib
import pickle
import re
import shutil
import subprocess
import time

import pytest
import torch
import torchvision.transforms as T
from torch.utils.data import DataLoader, default_collate
from torchvision.datasets import ImageFolder

import feedline
from feedline.doctor import probes, rules

ROOT = pathlib.Path(__file__).resolve().parents[2]


class SlowAugment:
    def __call__(self, x):
        time.sleep(0.004)
        return x


def _loader(root, **kwargs):
    ds = ImageFolder(root, transform=T.Compose([T.Resize(64), T.CenterCrop(64), SlowAugment(), T.ToTensor()]))
    kwargs.setdefault("batch_size", 8)
    kwargs.setdefault("num_workers", 2)
    return DataLoader(torch.utils.data.Subset(ds, range(96)), **kwargs)


@pytest.fixture(scope="module")
def report(small_images):
    """One real two-epoch loop, diagnosed."""
    with feedline.doctor.Doctor() as doctor:
        loader = _loader(small_images)
        for _ in range(2):
            for _batch in doctor.watch(loader):
                time.sleep(0.003)
        return doctor.report(file=None)


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


def test_every_report_field_is_documented(report):
    doc = (ROOT / "docs" / "doctor.md").read_text()
    schema = doc[doc.index("## JSON schema"):]

    def keys(obj, prefix=""):
        for k, v in obj.items():
            yield prefix + k
            if isinstance(v, dict) and k not in ("evidence", "settings", "h2d"):
                yield from keys(v, prefix + k + ".")
    missing = [k for k in keys(report.data) if f"`{k.split('.')[-1]}`" not in schema]
    assert not missing, f"fields missing from docs/doctor.md's JSON schema: {missing}"


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


# -- HTML in Chromium -------------------------------------------------------------------
def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("headless Chromium is not installed (scripts/install-deps.sh installs Debian's chromium)")


def _render(chromium, html_path, out_dir, *extra):
    cmd = [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
           f"--user-data-dir={out_dir / 'profile'}", "--enable-logging=stderr", "--v=0", *extra,
           html_path.as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def _console_errors(stderr):
    return [l for l in stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l or "Failed to load" in l]


def test_html_report_renders_in_headless_chromium_without_errors(report, tmp_path):
    chromium = _chromium()
    html = report.html()
    # Self-contained: no script, no stylesheet link, nothing fetched.
    assert "<script" not in html and "<link" not in html and "src=" not in html and "url(" not in html
    assert not re.search(r'https?://(?!www\.w3\.org/2000/svg")', html)
    page = tmp_path / "report.html"
    report.save_html(page)

    dom = _render(chromium, page, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    for plot in ("plot-starvation", "plot-stages", "plot-capacity"):
        assert re.search(rf'<svg id="{plot}"[^>]*>.*?</svg>', dom.stdout, re.S), f"{plot} missing from the DOM"
    assert 'id="findings"' in dom.stdout and "SlowAugment" in dom.stdout
    assert not _console_errors(dom.stderr), _console_errors(dom.stderr)

    shot = tmp_path / "report.png"
    run = _render(chromium, page, tmp_path, f"--screenshot={shot}", "--window-size=820,1600",
                  "--hide-scrollbars")
    assert run.returncode == 0, run.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    assert not _console_errors(run.stderr), _console_errors(run.stderr)


def test_the_console_error_check_does_catch_errors(tmp_path):
    # The check above would pass vacuously if Chromium's log said nothing.
    chromium = _chromium()
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><script>undefinedFunction()</script></body></html>")
    run = _render(chromium, page, tmp_path, "--dump-dom")
    assert _console_errors(run.stderr)


# -- terminal summary --------------------------------------------------------------------
def test_terminal_summary_leads_with_the_answer_and_is_short(report):
    text = report.summary()
    lines = text.splitlines()
    assert len(lines) <= 30 and max(len(l) for l in lines) <= 100
    assert lines[0].startswith("feedline doctor: torch DataLoader") and "num_workers=2" in text
    i = lines.index("findings:")
    head = " ".join(" ".join(lines[:i]).split())
    assert "waiting for data" in head and "samples/s" in head and "bound by the" in head
    top = report.findings[0]
    assert lines[i + 1].startswith(" 1. [") and top["title"] in " ".join(lines[i + 1:i + 3])
    assert str(report) == text


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
    ev["torch"]["h2d"] = {"pageable_s": 0.004, "pinned_s": 0.001, "pin_s": 0.0005}
    ev["loop"]["step_mean_s"] = 0.030  # a step-bound loop whose step includes the copy
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


def test_model_reproduces_the_measured_rate(report):
    cap = report.data["capacity"]
    assert abs(cap["model_error"]) < 0.35, cap


# -- watch mechanics ----------------------------------------------------------------------
def test_detach_restores_the_loader_and_breaking_out_records_the_step(small_images):
    loader = _loader(small_images, num_workers=1)
    ds, collate, init = loader.dataset, loader.collate_fn, loader.worker_init_fn
    compose = ds.dataset.transform
    before = list(compose.transforms)
    doctor = feedline.doctor.Doctor()
    for i, (images, labels) in enumerate(doctor.watch(loader)):
        assert isinstance(images, torch.Tensor) and images.shape == (8, 3, 64, 64)
        assert type(loader.dataset).__name__ == "TimedDataset"
        if i == 2:
            break
    assert len(doctor.steps) == 3  # the step the loop broke out of counts
    doctor.detach()
    assert loader.dataset is ds and loader.collate_fn is collate and loader.worker_init_fn is init
    assert compose.transforms == before
    images, _ = next(iter(loader))
    assert isinstance(images, torch.Tensor)


def test_a_batch_that_escapes_the_doctor_still_unpacks(small_images):
    loader = _loader(small_images, num_workers=0)
    with feedline.doctor.Doctor() as doctor:
        doctor.watch(loader)
        raw = next(iter(loader))  # iterating the loader itself while attached
        images, labels = raw
        assert images.shape == (8, 3, 64, 64) and raw[1] is labels and len(raw) == 2


def test_probes_pickle_for_spawned_workers(small_images):
    ds = ImageFolder(small_images, transform=T.Compose([T.CenterCrop(64), T.ToTensor()]))
    wrapped = pickle.loads(pickle.dumps(probes.TimedDataset(ds)))
    assert len(wrapped) == len(ds) and wrapped[0][0].shape == (3, 64, 64)
    tf = pickle.loads(pickle.dumps(probes.TimedTransform(T.CenterCrop(8), 0)))
    collate = pickle.loads(pickle.dumps(probes.TimedCollate(default_collate, True)))
    batch = collate([tf(ds[i][0]) for i in range(2)])
    assert isinstance(batch, probes.ProbedBatch) and batch.data.shape == (2, 3, 8, 8)
    back = pickle.loads(pickle.dumps(batch))
    assert torch.equal(back.data, batch.data) and back.info["samples"] == batch.info["samples"]


def test_any_iterable_is_timed_from_the_outside():
    data = [torch.zeros(4, 3) for _ in range(20)]

    def slow():
        for x in data:
            time.sleep(0.004)
            yield x
    doctor = feedline.doctor.Doctor()
    for _ in doctor.watch(slow()):
        time.sleep(0.0005)
    r = doctor.report(file=None)
    assert r.data["loader"]["kind"] == "iterable" and r.data["loop"]["samples"] == 80
    assert r.data["loop"]["starvation"] > 0.6
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
    # 2 workers, 8 samples of >= 4 ms each: at most ~500 samples/s.
    assert 150 < cap["loader_samples_per_s"] < 700
    assert cap["step_samples_per_s"] == pytest.approx(8 / 0.010, rel=0.25)
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
