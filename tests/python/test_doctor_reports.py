"""feedline.doctor's reports and mechanics (python/feedline/doctor/,
docs/doctor.md): the JSON schema, the Chrome trace, the HTML report rendered
in headless Chromium, the terminal summary, the rules on synthetic evidence,
and what watch() does to (and gives back to) a DataLoader."""
import copy
import importlib
import json
import math
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


# Free-form objects: documented as such, their keys are not a schema.
FREE_FORM = {"loader.settings", "findings.evidence", "feedline.ring", "pipeline.summary.efficiency"}


def documented_paths():
    """The dotted field paths docs/doctor.md's JSON schema section names:
    "Top level: `a`, ..." and one bullet per section, "- `sec`: `f`, `g`
    (`child`, ...), `h` and `i` (children of both)". A name followed by a
    parenthesis has the backticked names inside it as children; names joined
    by " and " share them."""
    doc = (ROOT / "docs" / "doctor.md").read_text()
    section = doc[doc.index("## JSON schema"):]
    section = section[:section.index("\n## ", 3)]
    entries = re.findall(r"^(?:Top level:|- `(\w+)`[^:`\n]*:)(.*?)(?=^- `|^\n|\Z)", section, re.M | re.S)
    assert len(entries) > 10, "the schema section's layout changed: fix documented_paths()"
    paths = set()
    for root, body in entries:
        stack, run, prev_end = [[root] if root else [""]], [], 0
        for m in re.finditer(r"`([^`]+)`|[()]", body):
            between = body[prev_end:m.start()]
            prev_end = m.end()
            if m.group(0) == "(":
                stack.append(run or [None])
                run = []
            elif m.group(0) == ")":
                if len(stack) > 1:
                    stack.pop()
                run = []
            else:
                run = run + [m.group(1)] if run and between == " and " else [m.group(1)]
                prefixes = [""]
                for level in stack:
                    names = [n for n in level if n]
                    if names:
                        prefixes = [f"{p}.{n}" if p else n for p in prefixes for n in names]
                paths.update(f"{p}.{m.group(1)}" if p else m.group(1) for p in prefixes)
    return paths


def report_paths(obj, prefix=""):
    """Every dotted field path of a report; a list of objects contributes
    its elements' fields under the list's own path."""
    items = obj.items() if isinstance(obj, dict) else ()
    for k, v in items:
        path = f"{prefix}.{k}" if prefix else k
        yield path
        if path in FREE_FORM:
            continue
        if isinstance(v, dict):
            yield from report_paths(v, path)
        elif isinstance(v, list):
            for e in v:
                yield from report_paths(e, path)


def undocumented(data):
    doc = documented_paths()
    return sorted({p for p in report_paths(data) if p not in doc})


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


# -- watch mechanics ----------------------------------------------------------------------
def test_detach_restores_the_loader_and_breaking_out_records_the_step(small_images):
    loader = _loader(small_images, num_workers=1)
    ds, collate, init = loader.dataset, loader.collate_fn, loader.worker_init_fn
    compose = ds.dataset.transform
    before = list(compose.transforms)
    doctor = feedline.doctor.Doctor()
    for i, (images, labels) in enumerate(doctor.watch(loader)):
        assert isinstance(images, torch.Tensor) and images.shape == (8, 3, 64, 64)
        assert loader.dataset is ds and probes.is_timed(ds) and isinstance(ds, torch.utils.data.Subset)
        if i == 2:
            break
    assert len(doctor.steps) == 3  # the step the loop broke out of counts
    doctor.detach()
    assert loader.dataset is ds and loader.collate_fn is collate and loader.worker_init_fn is init
    assert type(ds) is torch.utils.data.Subset and not probes.is_timed(ds)
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
    object.__setattr__(ds, "__class__", probes.timed_class(ImageFolder))  # as the doctor times it
    wrapped = pickle.loads(pickle.dumps(ds))
    assert type(wrapped) is type(ds) and isinstance(wrapped, ImageFolder) and probes.is_timed(wrapped)
    assert len(wrapped) == len(ds) and wrapped[0][0].shape == (3, 64, 64)
    assert vars(wrapped).keys() == vars(ds).keys() and wrapped.samples == ds.samples
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
            time.sleep(0.010)
            yield x
    doctor = feedline.doctor.Doctor()
    for _ in doctor.watch(slow()):
        pass  # a free step: all the loop's time is waiting for the iterable
    r = doctor.report(file=None)
    loop = r.data["loop"]
    assert r.data["loader"]["kind"] == "iterable" and loop["samples"] == 80
    assert loop["wait_s"] >= 20 * 0.010 and loop["starvation"] == pytest.approx(loop["wait_s"] / loop["wall_s"])
    assert loop["starvation"] > 0.5
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
    # Upper bounds from the planted sleeps (a busy machine only lowers the
    # rates): 2 workers, 8 samples of >= 4 ms each make at most ~500
    # samples/s (700: batches prepared before the timing began); a step of
    # >= 10 ms takes at most 800.
    assert 0 < cap["loader_samples_per_s"] < 700
    assert 0 < cap["step_samples_per_s"] <= 8 / 0.010
    assert seen[-5:] == [8] * 5  # the step alone ran on real batches
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


# -- the probes stand in faithfully for the user's objects ------------------------------------
class Range(torch.utils.data.IterableDataset):
    """torch's documented IterableDataset example."""

    def __init__(self, start, end, transform=None):
        self.start, self.end, self.transform = start, end, transform

    def __iter__(self):
        for i in range(self.start, self.end):
            yield self.transform(i) if self.transform else i


def split_range(worker_id):
    """torch's documented worker_init_fn: each worker takes its share of the range."""
    info = torch.utils.data.get_worker_info()
    ds = info.dataset
    overall_start, overall_end = ds.start, ds.end
    per = int(math.ceil((overall_end - overall_start) / float(info.num_workers)))
    ds.start = overall_start + info.id * per
    ds.end = min(ds.start + per, overall_end)


def test_attribute_writes_reach_the_users_dataset_so_workers_split_an_iterable():
    loader = DataLoader(Range(0, 8), num_workers=2, worker_init_fn=split_range, batch_size=None)
    assert sorted(int(x) for x in loader) == list(range(8))
    doctor = feedline.doctor.Doctor()
    assert sorted(int(x) for x in doctor.watch(loader)) == list(range(8))  # each item once, not once per worker
    r = doctor.report(file=None)
    doctor.detach()
    assert r.data["loop"]["samples"] == 8 and r.data["torch"]["samples_timed"] == 8
    # The doctor times the user's own object (its class swapped in place), so
    # every write lands on it; a dataset that is not a torch Dataset gets a
    # wrapper that keeps only its own attribute and forwards the rest.
    ds = Range(0, 4)
    object.__setattr__(ds, "__class__", probes.timed_class(Range))
    assert sorted(pickle.loads(pickle.dumps(ds))) == [0, 1, 2, 3] and isinstance(ds, Range)

    class Plain:
        start = 0

        def __getitem__(self, i):
            return i
    plain = Plain()
    w = probes.TimedContainer(plain)
    w.start = 2
    assert plain.start == 2 and "start" not in vars(w) and w.start == 2
    del w.start
    assert plain.start == 0 and "start" not in vars(plain)


class Squares(torch.utils.data.Dataset):
    def __init__(self, n=32):
        self.n, self.batched_calls = n, 0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(0.001)
        return torch.full((3,), float(i * i))


class BatchedSquares(Squares):
    """A dataset that loads a whole batch at once (like torch's Subset from
    2.1, or Hugging Face datasets)."""

    def __getitems__(self, indices):
        self.batched_calls += 1
        time.sleep(0.004)
        return [torch.full((3,), float(i * i)) for i in indices]


def _fresh_records():
    r = probes.records()
    r.samples, r.transforms = [], []
    return r


def test_getitems_is_timed_per_sample_and_only_offered_when_the_dataset_has_it():
    assert not hasattr(probes.timed_class(Squares), "__getitems__")
    ds = BatchedSquares()
    w = BatchedSquares()
    object.__setattr__(w, "__class__", probes.timed_class(BatchedSquares))
    assert hasattr(w, "__getitems__") and isinstance(w, BatchedSquares) and len(w) == 32
    w = pickle.loads(pickle.dumps(w))
    assert hasattr(w, "__getitems__") and probes.is_timed(w)
    r = _fresh_records()
    out = w.__getitems__([0, 1, 2, 3])
    assert [int(x[0]) for x in out] == [0, 1, 4, 9]
    assert [s[4] for s in r.samples] == [0, 1, 2, 3]  # one record per sample, with its index
    assert sum(s[1] for s in r.samples) >= 0.004 and r.samples[1][0] > r.samples[0][0]
    _fresh_records()

    # Through a DataLoader: torch's fetcher calls __getitems__ where it knows
    # it, else __getitem__ per sample; either way every sample is timed.
    loader = DataLoader(ds, batch_size=8, num_workers=0)
    with feedline.doctor.Doctor() as doctor:
        for _ in doctor.watch(loader):
            pass
        t = doctor.report(file=None).data["torch"]
    assert t["samples_timed"] == 32 and t["samples_per_batch"] == 8
    per_sample = 0.004 / 8 if ds.batched_calls else 0.001
    assert t["sample"]["wall_s"] >= 0.9 * per_sample


def test_a_batched_index_counts_every_sample_it_loads():
    class Rows(Squares):
        def __getitem__(self, indices):  # a batched-index sampler hands over a list
            return torch.stack([torch.full((3,), float(i)) for i in indices])

    sampler = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(range(64)), 8, False)
    loader = DataLoader(Rows(64), batch_size=None, sampler=sampler)
    with feedline.doctor.Doctor() as doctor:
        for _ in doctor.watch(loader):
            pass
        data = doctor.report(file=None).data
    assert data["loop"]["samples"] == 64 and data["torch"]["samples_timed"] == 64
    assert data["torch"]["samples_per_batch"] == 8


class Chunks(torch.utils.data.IterableDataset):
    """Yields ready-made batches of 16 rows (the batching done in the dataset)."""

    def __iter__(self):
        for i in range(6):
            time.sleep(0.008)
            yield torch.full((16, 3), float(i))


def test_samples_are_counted_in_the_batch_and_the_torch_evidence_uses_the_same_unit():
    with feedline.doctor.Doctor() as doctor:
        for _ in doctor.watch(DataLoader(Chunks(), batch_size=None)):
            pass
        data = doctor.report(file=None).data
    t = data["torch"]
    assert data["loop"]["samples"] == 96 and t["samples_timed"] == 6  # 6 dataset calls, 96 samples
    assert t["samples_per_batch"] == 16
    # Per sample, not per call: the 96 samples' times fit in the loop's wall
    # time (num_workers=0: every call ran inside it); per call they would be
    # 16 times that.
    assert t["sample"]["wall_s"] >= 0.008 / 16
    assert t["sample"]["wall_s"] * 96 <= data["loop"]["wall_s"]
    # The model's rate is in the loop's unit (samples), not in dataset calls
    # (which would be 16 times lower than the loop it was measured on).
    assert rules.TorchModel(data).B == 16
    assert data["capacity"]["model_samples_per_s"] > 0.3 * data["loop"]["samples_per_s"]


class AddOne:
    def __call__(self, x):
        return x + 1


class Compose:  # torchvision's, minus the import
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class WithTransform(torch.utils.data.Dataset):
    def __init__(self, n, transform):
        self.n, self.transform = n, transform

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.transform(torch.zeros(3))


def test_a_compose_shared_with_another_loader_is_timed_only_for_the_watched_one():
    shared = Compose([AddOne()])
    train = DataLoader(WithTransform(16, shared), batch_size=8)
    val = DataLoader(WithTransform(400, shared), batch_size=100)
    _fresh_records()
    with feedline.doctor.Doctor() as doctor:
        for _ in doctor.watch(train):
            for _ in val:  # validation in the middle of the epoch, same Compose
                pass
        recorded = sum(len(info["transforms"]) for info, *_ in doctor.probe.batches)
        assert recorded == 16  # one per training sample, none for the 800 validation ones
        assert doctor.report(file=None).data["torch"]["transforms"][0]["name"] == "AddOne"
    assert probes.records().transforms == [] and probes.records().samples == []
    # An IterableDataset's transforms are timed as its items are made.
    loader = DataLoader(Range(0, 12, transform=Compose([AddOne()])), batch_size=4)
    with feedline.doctor.Doctor() as doctor:
        assert [b.tolist() for b in doctor.watch(loader)] == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
        assert sum(len(info["transforms"]) for info, *_ in doctor.probe.batches) == 12


class SizedRange(Range):
    def __len__(self):
        return self.end - self.start


def test_len_of_a_watched_loader_over_an_iterable_with_len():
    loader = DataLoader(SizedRange(0, 10), batch_size=2)
    doctor = feedline.doctor.Doctor()
    w = doctor.watch(loader)
    assert len(loader) == 5 and len(w) == 5
    assert sum(1 for _ in w) == 5
    doctor.detach()
    # Without a __len__ in the dataset, the timed one has none either.
    assert not hasattr(probes.timed_class(Range), "__len__")
    assert hasattr(probes.timed_class(SizedRange), "__len__")


def test_module_level_watch_report_restores_the_loader_even_with_persistent_workers():
    data = [torch.zeros(3) for _ in range(16)]
    loader = DataLoader(data, batch_size=4, num_workers=2, persistent_workers=True)
    w = feedline.doctor.watch(loader)
    for _epoch in range(2):
        for _ in w:
            pass
        # Between epochs the persistent workers (started with the probes) live on.
        assert isinstance(loader.dataset, probes.TimedContainer)  # a list: not a torch Dataset
    it = loader._iterator
    w.report(file=None)
    assert loader.dataset is data and loader._iterator is not it
    assert all(type(b) is torch.Tensor for b in loader)
    w.report(file=None)  # idempotent
    w.close()
    # Without persistent workers each epoch's end restores the loader: no report needed.
    loader = DataLoader(data, batch_size=4, num_workers=1)
    for _ in feedline.doctor.watch(loader):
        pass
    assert loader.dataset is data and type(next(iter(loader))) is torch.Tensor


def test_persistent_workers_keep_running_across_watched_epochs():
    data = [torch.zeros(3) for _ in range(16)]
    loader = DataLoader(data, batch_size=4, num_workers=1, persistent_workers=True)
    with feedline.doctor.Doctor() as doctor:
        for _ in doctor.watch(loader):
            pass
        it = loader._iterator
        for _ in doctor.watch(loader):
            pass
        assert loader._iterator is it  # not restarted by the doctor between epochs
    assert loader.dataset is data


# -- rules and accounting on synthetic evidence --------------------------------------------
class FakeEvent:
    """Stands in for torch.cuda.Event: a time on the device's clock, in s."""

    def __init__(self, t=0.0):
        self.t = t

    def record(self):
        pass

    def synchronize(self):
        pass

    def elapsed_time(self, other):  # milliseconds, like CUDA events
        return (other.t - self.t) * 1e3


def test_device_starvation_leaves_out_warmup_and_gaps_across_epochs():
    from feedline.doctor.watch import _DeviceTimer
    dev = _DeviceTimer("auto")
    # Two epochs of 8 steps: 10 ms busy, 2 ms idle between steps; the first
    # two steps of each epoch wait 50 ms (warm-up), and 5 s of validation
    # separate the epochs.
    t = 0.0
    for epoch in range(2):
        for i in range(8):
            t += 0.050 if i < 2 else 0.002
            dev.pairs.append((FakeEvent(t), FakeEvent(t + 0.010), epoch))
            t += 0.010
        t += 5.0
    s = dev.summary(skip=2)
    assert s["steps"] == 16 and s["steady_steps"] == 12
    assert s["busy_s"] == pytest.approx(12 * 0.010)
    # The third step's wait counts (the loop waited for it in steady state);
    # the first step of epoch 1 (after validation) and the warm-up do not.
    assert s["idle_s"] == pytest.approx(12 * 0.002)
    assert s["starvation"] == pytest.approx(0.002 / 0.012)
    doc = documented_paths()
    assert all(f"loop.device.{k}" in doc for k in s)


def test_device_events_and_cpu_window_count_every_step_past_keep_steps(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Event", lambda enable_timing=True: FakeEvent())
    doctor = feedline.doctor.Doctor(keep_steps=5)
    doctor._device.enabled = True
    for _ in doctor.watch([torch.zeros(2, 3)] * 20):
        pass
    assert len(doctor.steps) == 5 and len(doctor._device.pairs) == 5
    assert doctor.step_count == 20 and doctor.epochs[0]["samples"] == 40
    assert doctor.cpu_window[1][3] == 20  # the CPU window counts all 20 steps


def test_persistent_workers_needs_a_second_epoch(report):
    ev = _evidence(report)
    one = ev["loop"]["epoch_list"][0]
    one.update(first_batch_s=0.8, wall_s=2.0)
    ev["loop"]["epoch_list"] = [one]
    assert not any(f["id"] == "persistent_workers" for f in rules.diagnose(ev))
    ev["loop"]["epoch_list"] = [one, dict(one, index=1)]
    f = next(f for f in rules.diagnose(ev) if f["id"] == "persistent_workers")
    assert f["predicted_speedup"] > 1.1 and "only the first epoch" in f["summary"]


def test_host_to_device_copy_is_measured_only_when_the_loop_used_cuda(monkeypatch):
    watch_mod = importlib.import_module("feedline.doctor.watch")  # (feedline.doctor.watch is the function)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    calls = []
    monkeypatch.setattr(watch_mod.Doctor, "_measure_h2d", lambda self: calls.append(1))
    loader = DataLoader([torch.zeros(3)] * 16, batch_size=4)
    doctor = feedline.doctor.Doctor()
    for _ in doctor.watch(loader):
        pass
    doctor.measure_capacity(loader, batches=2)
    assert calls == [] and doctor._h2d is None
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)  # the loop touched CUDA
    doctor.measure_capacity(loader, batches=2)
    assert calls == [1]
