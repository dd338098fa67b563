"""Chrome / Perfetto trace of a watched loop (the Trace Event Format's JSON
object form: open it in ui.perfetto.dev or chrome://tracing).

Process 1 is the training loop: one "data wait" and one "step" span per
step on the main thread, and a "waiting for data" counter. Process 2 is the
loader: for a torch DataLoader one track per worker process (each sample's
__getitem__ with its transforms nested inside, then collate, and
worker_init_fn), and one for the pin-memory thread. Process 3 holds the
steps Doctor(profile_steps=N) profiled, in torch.profiler's Kineto form
(step_profile.trace_events: what `--trace` reads back). Timestamps are
microseconds since the doctor started watching. A pipeline report (the CLI)
has one process per thread count measured, with the consumer's wait for
each batch.
"""

LOOP_PID, LOADER_PID = 1, 2


def _us(s):
    return round(s * 1e6, 1)


def chrome_trace(report, spans=(), events=()):
    ev = []
    meta = lambda pid, tid, kind, name: ev.append(  # noqa: E731
        {"name": kind, "ph": "M", "pid": pid, **({"tid": tid} if tid is not None else {}), "args": {"name": name}})
    meta(LOOP_PID, None, "process_name", "training loop")
    meta(LOOP_PID, 1, "thread_name", "main thread")
    rows = (report.get("timeline") or {}).get("rows") or []
    for i, (start, wait, step, samples, epoch) in enumerate(rows):
        args = {"step": i, "epoch": epoch, "samples": samples}
        ev.append({"name": "data wait", "cat": "wait", "ph": "X", "ts": _us(start), "dur": _us(wait),
                   "pid": LOOP_PID, "tid": 1, "args": args})
        ev.append({"name": "step", "cat": "step", "ph": "X", "ts": _us(start + wait), "dur": _us(step),
                   "pid": LOOP_PID, "tid": 1, "args": args})
        period = wait + step
        ev.append({"name": "waiting for data", "ph": "C", "ts": _us(start), "pid": LOOP_PID,
                   "args": {"percent": round(100 * wait / period, 1) if period > 0 else 0.0}})
    for i, run in enumerate(report.get("scan") or []):
        pid = 10 + i
        meta(pid, None, "process_name", f"pipeline alone, {run['threads']} thread(s)")
        meta(pid, 1, "thread_name", "consumer")
        for j, (start, wait) in enumerate(run.get("waits") or []):
            ev.append({"name": "wait for batch", "cat": "wait", "ph": "X", "ts": _us(start), "dur": _us(wait),
                       "pid": pid, "tid": 1, "args": {"batch": j}})
    if spans:
        meta(LOADER_PID, None, "process_name", "loader")
        lanes: dict[str, int] = {}
        for lane, name, cat, start, dur in spans:
            if lane not in lanes:
                lanes[lane] = len(lanes) + 1
                meta(LOADER_PID, lanes[lane], "thread_name", lane)
            ev.append({"name": name, "cat": cat, "ph": "X", "ts": _us(start), "dur": _us(dur),
                       "pid": LOADER_PID, "tid": lanes[lane]})
    ev.extend(events)  # already in the trace's form (the profiled steps, step_profile.trace_events)
    return {"traceEvents": ev, "displayTimeUnit": "ms",
            "otherData": {"schema": report.get("schema"), "schema_version": report.get("schema_version"),
                          "loader": (report.get("loader") or {}).get("kind")}}


def validate_trace(trace):
    """Raises ValueError unless `trace` is a well-formed trace of this kind."""
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise ValueError("a trace is an object with a traceEvents list")
    for i, e in enumerate(trace["traceEvents"]):
        ph = e.get("ph")
        if ph not in ("X", "M", "C"):
            raise ValueError(f"traceEvents[{i}]: phase {ph!r}")
        if not isinstance(e.get("name"), str) or not isinstance(e.get("pid"), int):
            raise ValueError(f"traceEvents[{i}]: needs a name and an integer pid")
        if ph == "X":
            if not isinstance(e.get("tid"), int) or e.get("dur", -1) < 0 or not isinstance(e.get("ts"), (int, float)):
                raise ValueError(f"traceEvents[{i}]: a complete event needs tid, ts and dur >= 0")
        if ph == "C" and not isinstance(e.get("args"), dict):
            raise ValueError(f"traceEvents[{i}]: a counter needs args")
    return True
