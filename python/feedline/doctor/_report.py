"""The report: evidence assembled from a Doctor, the findings from rules.py,
and its renderings (terminal summary, JSON, trace, HTML).

The JSON schema is documented in docs/doctor.md; SCHEMA_VERSION changes
whenever a field is removed or changes meaning (adding fields does not).
validate() checks a dict against it and is what the tests use.
"""
import json
import os
import platform
import time

from . import rules

SCHEMA = "feedline.doctor.report"
SCHEMA_VERSION = 1


def machine_info(cores=None):
    info = {"cores": cores or len(os.sched_getaffinity(0)), "cpu": platform.processor() or platform.machine(),
            "cuda": False, "gpu": None, "mem_total_bytes": None, "mem_available_bytes": None}
    try:
        with open("/proc/meminfo") as f:
            kb = {l.split(":")[0]: int(l.split()[1]) for l in f if len(l.split()) >= 2 and l.split()[1].isdigit()}
        info["mem_total_bytes"] = kb.get("MemTotal", 0) * 1024
        info["mem_available_bytes"] = kb.get("MemAvailable", 0) * 1024
    except OSError:
        pass
    try:
        import torch
        if torch.cuda.is_available():
            info["cuda"] = True
            info["gpu"] = torch.cuda.get_device_name(0)
    except Exception:
        pass
    return info


def _loop_section(doctor, skip=1):
    steps = doctor.steps
    n = len(steps)
    wait = sum(s[1] for s in steps)
    step = sum(s[2] for s in steps)
    samples = sum(s[3] for s in steps)
    wall = wait + step
    # Steady state: every step but the first `skip` of each epoch: start-up,
    # warm-up, and the batches prepared ahead that the loop takes at once.
    per_epoch = {}
    for s in steps:
        per_epoch[s[6]] = per_epoch.get(s[6], 0) + 1
    firsts, seen = set(), {}
    for i, s in enumerate(steps):
        seen[s[6]] = seen.get(s[6], 0) + 1
        # A short epoch keeps at least three quarters of its steps.
        if seen[s[6]] <= min(skip, max(1, per_epoch[s[6]] // 4)):
            firsts.add(i)
    steady = [s for i, s in enumerate(steps) if i not in firsts]
    st_wall = sum(s[1] + s[2] for s in steady)
    st_wait = sum(s[1] for s in steady)
    st_samples = sum(s[3] for s in steady)
    epochs = []
    for e in doctor.epochs:
        end = e["t_end"] if e["t_end"] is not None else time.perf_counter()
        epochs.append({"index": e["index"], "steps": e["steps"], "samples": e["samples"],
                       "wall_s": end - e["t_iter"], "first_batch_s": e["first_batch_s"]})
    return {
        "steps": n, "samples": samples, "epochs": len(doctor.epochs), "wall_s": wall, "wait_s": wait,
        "step_s": step, "starvation": wait / wall if wall > 0 else 0.0,
        "samples_per_s": samples / wall if wall > 0 else 0.0,
        "steady_samples_per_s": st_samples / st_wall if st_wall > 0 else None,
        "steady_starvation": st_wait / st_wall if st_wall > 0 else None,
        "wait_mean_s": wait / n if n else 0.0, "step_mean_s": step / n if n else 0.0,
        "step_cpu_mean_s": sum(s[4] for s in steps) / n if n else 0.0,
        "receive_cpu_mean_s": sum(s[5] for s in steps) / n if n else 0.0,
        "process_cpu_mean_s": sum(s[7] for s in steps) / n if n else 0.0,
        "device": doctor._device.summary(skip),
        "epoch_list": epochs,
    }


def _stages(ev):
    """Time per stage, per batch, for the plots and the summary."""
    out = []
    t = ev.get("torch")
    loop = ev.get("loop") or {}
    if t:
        B = t["samples_per_batch"]
        where = "worker" if ev["loader"]["settings"].get("num_workers") else "main"
        out.append({"name": "load (read+decode)", "where": where, "per_batch_s": B * t["load"]["wall_s"],
                    "cpu_s": B * t["load"]["cpu_s"], "blocked_s": B * t["load"]["blocked_s"]})
        for tf in t["transforms"]:
            out.append({"name": tf["name"], "where": where, "per_batch_s": B * tf["wall_s"],
                        "cpu_s": B * tf["cpu_s"], "blocked_s": None})
        b = t["batch"]
        out.append({"name": "collate", "where": where, "per_batch_s": b["collate_s"], "cpu_s": b["collate_cpu_s"],
                    "blocked_s": None})
        if b.get("pin_s"):
            out.append({"name": "pin memory", "where": "pin_thread", "per_batch_s": b["pin_s"], "cpu_s": None,
                        "blocked_s": None})
        if b.get("receive_s") is not None:
            out.append({"name": "receive", "where": "main", "per_batch_s": b["receive_s"], "cpu_s": None,
                        "blocked_s": None})
    f = ev.get("feedline")
    if f:
        B = ev["loader"].get("batch_size") or 1
        for op in f["ops"]:
            out.append({"name": op["name"], "where": "engine", "per_batch_s": B * op["per_item_s"], "cpu_s": None,
                        "blocked_s": None})
    if loop.get("steps"):
        out.append({"name": "step", "where": "main", "per_batch_s": loop["step_mean_s"],
                    "cpu_s": loop.get("step_cpu_mean_s"), "blocked_s": None})
    return out


def build_evidence(doctor):
    probe = doctor.probe
    kind = ("torch" if type(probe).__name__ == "TorchProbe" else
            "feedline" if type(probe).__name__ == "FeedlineProbe" else "iterable")
    settings = probe.settings() if probe is not None else {}
    loop = _loop_section(doctor, probe.warmup_batches() if probe is not None else 1)
    ev = {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "mode": "loop", "created_unix": time.time(),
          "machine": machine_info(doctor.cores),
          "loader": {"kind": kind, "type": type(doctor.iterable).__name__ if doctor.iterable is not None else None,
                     "batch_size": settings.get("batch_size"), "settings": settings},
          "loop": loop, "torch": None, "feedline": None}
    if kind == "torch":
        ev["torch"] = probe.evidence([s[1] for s in doctor.steps], loop["wall_s"])
        if ev["torch"] is not None and doctor._h2d:
            ev["torch"]["h2d"] = doctor._h2d
    elif kind == "feedline":
        ev["feedline"] = probe.evidence()
    ev["machine"]["other_cpu_cores"] = _other_cpu(doctor, ev)
    ev["stages"] = _stages(ev)
    ev["capacity"] = rules.capacity(ev, doctor.capacity)
    t0 = doctor.t0 or 0.0
    ev["timeline"] = {"columns": ["start_s", "wait_s", "step_s", "samples", "epoch"],
                      "rows": [[round(s[0] - t0, 6), round(s[1], 6), round(s[2], 6), s[3], s[6]]
                               for s in doctor.steps]}
    return ev


def _other_cpu(doctor, ev):
    """Cores kept busy by other processes while the loop ran: the machine's
    busy time minus the training process's and its workers' CPU time."""
    w = doctor.cpu_window
    if not w or w[1] is None or w[0][1] is None or w[1][1] is None:
        return None
    wall = w[1][0] - w[0][0]
    if wall < 0.2:  # /proc/stat counts in 10 ms ticks
        return None
    ours = w[1][2] - w[0][2]
    t = ev.get("torch")
    if t and ev["loader"]["settings"].get("num_workers"):
        b = t["batch"]
        per_batch = t["samples_per_batch"] * t["sample"]["cpu_s"] + b["collate_cpu_s"] + (b.get("worker_hidden_cpu_s") or 0)
        ours += per_batch * (w[1][3] - w[0][3])
    return max(0.0, (w[1][1] - w[0][1] - ours) / wall)


def _spans(doctor):
    """Worker-side spans of a torch loader, relative to the doctor's start:
    (lane, name, category, start_s, dur_s)."""
    probe = doctor.probe
    out = []
    if type(probe).__name__ != "TorchProbe" or doctor.t0 is None:
        return out
    t0 = doctor.t0
    for info, _, _, _ in probe.batches[:20000]:
        lane = f"worker {info['worker']} (pid {info['pid']})" if info["worker"] >= 0 else "main (loading)"
        for (s0, wall, _, _, idx) in info["samples"]:
            out.append((lane, f"sample {idx}" if idx >= 0 else "sample", "getitem", s0 - t0, wall))
        for (_, tfi, s0, wall, _, _, _) in info["transforms"]:
            out.append((lane, f"transform {tfi}", "transform", s0 - t0, wall))
        c = info["collate"]
        out.append((lane, "collate", "collate", c[0] - t0, c[1]))
        if info.get("init"):
            out.append((lane, "worker_init_fn", "startup", info["init"][0] - t0, info["init"][1]))
        if info.get("pin"):
            out.append(("pin_memory thread", "pin", "pin", info["pin"][0] - t0, info["pin"][1]))
    return out


class Report:
    """A diagnosis: `data` is the JSON document (docs/doctor.md)."""

    def __init__(self, data, spans=()):
        self.data = data
        self.spans = list(spans)

    @classmethod
    def from_doctor(cls, doctor):
        ev = doctor.evidence()
        ev["findings"] = rules.diagnose(ev)
        return cls(ev, _spans(doctor))

    @classmethod
    def from_json(cls, path_or_dict, rediagnose=False):
        data = path_or_dict if isinstance(path_or_dict, dict) else json.load(open(path_or_dict))
        if rediagnose and data.get("mode") == "loop":
            data["findings"] = rules.diagnose(data)
        return cls(data)

    @property
    def findings(self):
        return self.data.get("findings", [])

    @property
    def top(self):
        return self.findings[0] if self.findings else None

    def to_json(self, indent=1):
        return json.dumps(self.data, indent=indent, default=_jsonable)

    def save_json(self, path):
        with open(path, "w") as f:
            f.write(self.to_json())

    def trace(self):
        from .trace import chrome_trace
        return chrome_trace(self.data, self.spans)

    def save_trace(self, path):
        with open(path, "w") as f:
            json.dump(self.trace(), f)

    def html(self):
        from .html import render
        return render(self.data)

    def save_html(self, path):
        with open(path, "w") as f:
            f.write(self.html())

    def summary(self):
        from .summary import text
        return text(self.data)

    __str__ = summary


def _jsonable(x):
    if hasattr(x, "item"):
        return x.item()
    if isinstance(x, (set, tuple)):
        return list(x)
    return str(x)


# -- schema ------------------------------------------------------------------------
_NUM = (int, float)
_REQUIRED = {
    "": {"schema": str, "schema_version": int, "mode": str, "created_unix": _NUM, "machine": dict,
         "loader": dict, "findings": list},
    "machine": {"cores": int, "cuda": bool},
    "loader": {"kind": str, "settings": dict},
    "loop": {"steps": int, "samples": int, "epochs": int, "wall_s": _NUM, "wait_s": _NUM, "step_s": _NUM,
             "starvation": _NUM, "samples_per_s": _NUM, "wait_mean_s": _NUM, "step_mean_s": _NUM,
             "epoch_list": list},
    "capacity": {"loader_samples_per_s": dict, "step_samples_per_s": dict},
    "timeline": {"columns": list, "rows": list},
    "finding": {"rank": int, "id": str, "title": str, "severity": str, "summary": str, "fix": str,
                "evidence": dict, "predicted_samples_per_s": (type(None),) + _NUM,
                "predicted_speedup": (type(None),) + _NUM},
}
SEVERITIES = ("high", "medium", "low", "info")


def validate(data):
    """Raises ValueError naming the first field that breaks the schema."""
    def need(obj, section, where):
        for key, typ in _REQUIRED[section].items():
            if key not in obj:
                raise ValueError(f"{where}: missing '{key}'")
            if not isinstance(obj[key], typ) or (typ is int and isinstance(obj[key], bool)):
                raise ValueError(f"{where}.{key}: {type(obj[key]).__name__} is not {typ}")
    need(data, "", "report")
    if data["schema"] != SCHEMA:
        raise ValueError(f"report.schema: {data['schema']!r} is not {SCHEMA!r}")
    if data["schema_version"] != SCHEMA_VERSION:
        raise ValueError(f"report.schema_version: {data['schema_version']} (this build reads {SCHEMA_VERSION})")
    if data["mode"] not in ("loop", "pipeline"):
        raise ValueError(f"report.mode: {data['mode']!r}")
    need(data["machine"], "machine", "report.machine")
    need(data["loader"], "loader", "report.loader")
    if data["loader"]["kind"] not in ("torch", "feedline", "iterable"):
        raise ValueError(f"report.loader.kind: {data['loader']['kind']!r}")
    if data["mode"] == "loop":
        for section in ("loop", "capacity", "timeline"):
            if not isinstance(data.get(section), dict):
                raise ValueError(f"report: missing '{section}'")
            need(data[section], section, f"report.{section}")
        cols = data["timeline"]["columns"]
        for i, row in enumerate(data["timeline"]["rows"]):
            if len(row) != len(cols) or not all(isinstance(v, _NUM) for v in row):
                raise ValueError(f"report.timeline.rows[{i}]: {row!r}")
        if not 0.0 <= data["loop"]["starvation"] <= 1.0:
            raise ValueError("report.loop.starvation: outside [0, 1]")
    else:
        if not isinstance(data.get("scan"), list) or not data["scan"]:
            raise ValueError("report: a pipeline report needs a non-empty 'scan'")
        for i, s in enumerate(data["scan"]):
            for key in ("threads", "samples_per_s", "stages"):
                if key not in s:
                    raise ValueError(f"report.scan[{i}]: missing '{key}'")
    for i, f in enumerate(data["findings"]):
        need(f, "finding", f"report.findings[{i}]")
        if f["rank"] != i + 1:
            raise ValueError(f"report.findings[{i}].rank: {f['rank']} (expected {i + 1})")
        if f["severity"] not in SEVERITIES:
            raise ValueError(f"report.findings[{i}].severity: {f['severity']!r}")
    json.dumps(data, default=_jsonable)  # serialisable
    return True
