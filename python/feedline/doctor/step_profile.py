"""Inside the step: a few steps under torch.profiler (Doctor(profile_steps=N)),
or a trace the user already saved (`feedline doctor --trace trace.json`),
turned into evidence (evidence.StepAnatomy). Measures and reads; decides
nothing (that is rules/step.py).

Both sources become one Profile: ops (name, thread, interval, the Python
stack innermost first, the device activity each launched), device
activities (kernels, copies) and step windows. The live profiler's events
come through _torch_compat (their fields differ between torch 1.13 and 2.x);
a trace is torch's Chrome / Kineto JSON: an object with `traceEvents`
(categories `cpu_op`, `python_function`, `user_annotation`, `kernel`,
`gpu_memcpy`, ...; the Python stack of an op from the `python_function`
events around it on its thread, or from a `Call stack` argument), or the
list of events a torch built without Kineto writes (names only, no stacks).

Step windows: `ProfilerStep#N` (what prof.step() marks) or the doctor's own
`feedline.doctor.step#N`; without either, the whole trace is one step.
"""
from __future__ import annotations

import ast
import dataclasses
import os
import re
import sys
from typing import Any, NamedTuple, Optional

from .evidence import CopyStat, DeviceBusy, OpShare, StepAnatomy, SyncSite

STEP_MARK = "feedline.doctor.step#"
EXACT_ARG = "feedline exact line"   # an op's argument in the doctor's trace: its stack's user line is the call's
_WINDOW = re.compile(r"^(ProfilerStep#|feedline\.doctor\.step#)(\d+)$")
_FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$")           # "path/train.py(42): step"
_WRAPPER = "feedline/doctor/_torch_compat.py("   # SyncCallSites' wrapper, as a stack frame
_CCALL = re.compile(r"^<built-in method (\w+) of ")      # "<built-in method item of Tensor object at 0x...>"
# Libraries whose frames are not the user's line: the first frame outside them is.
_LIBRARIES = ("torch", "torchvision", "torchaudio", "feedline", "functorch", "_pytest", "pluggy")
# The frameworks that run the loop are libraries too, installed ones only (a
# user's examples/lightning/ is the user's): a report names the user's step
# inside them (docs/integrations.md), not their internals.
# Ray too: Ray Data's progress bars wrap builtins.print (ray/experimental/tqdm_ray.py).
_FRAMEWORKS = ("lightning", "pytorch_lightning", "lightning_fabric", "accelerate", "transformers", "torchtitan",
               "torchdata", "ray")
_MATMUL = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
           "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::_convolution",
           "aten::cudnn_convolution", "aten::_scaled_dot_product_flash_attention",
           "aten::scaled_dot_product_attention"}
_SYNC_OPS = {"aten::item": "item", "aten::_local_scalar_dense": "item", "aten::is_nonzero": "bool",
             "aten::nonzero": "nonzero", "aten::masked_select": "nonzero", "aten::unique": "nonzero",
             "aten::_unique2": "nonzero", "aten::unique_consecutive": "nonzero"}
_SYNC_CALLS = {"item", "tolist", "cpu", "numpy", "nonzero", "__bool__"}
_COPY_OPS = {"aten::to", "aten::_to_copy", "aten::copy_"}


class Op(NamedTuple):
    name: str
    tid: int
    start_us: float
    end_us: float
    stack: tuple[str, ...]          # innermost first; () without with_stack
    ext_id: Optional[int]           # links device activity to the op that launched it
    dtypes: tuple[str, ...]         # input dtypes (record_shapes), () when not recorded
    exact: bool = False             # its user frame's line is the call's own line (with_exact_lines)


class Activity(NamedTuple):
    kind: str                       # "kernel", "memcpy", "memset"
    name: str
    start_us: float
    end_us: float
    bytes: Optional[int]
    ext_id: Optional[int]


class Profile(NamedTuple):
    ops: list[Op]
    activities: list[Activity]
    windows: list[tuple[float, float]]
    window_names: list[str]
    stacks: bool                    # any op carries a Python stack
    cuda: bool
    tensor_cores: Optional[bool]


# -- reading ----------------------------------------------------------------------------------
def _activity_kind(name: str, cat: str = "") -> str:
    low = (cat + " " + name).lower()
    return "memcpy" if "memcpy" in low else "memset" if "memset" in low else "kernel"


def from_events(events: list[dict[str, Any]], cuda: bool, tensor_cores: Optional[bool]) -> Profile:
    """A Profile from the live profiler's events, each a dict of the fields
    _torch_compat.profiler_events gives (name, tid, start_us, end_us, stack,
    device, python, id, linked_id, dtypes): a device event's linked_id is
    the id of the op that launched it. An op without a stack of its own
    (torch 2.x profiling without verbose events) takes the python_function
    events around it on its thread, as a Kineto trace gives them."""
    ops, acts, wins = [], [], []
    python: dict[int, list[tuple[float, float, str]]] = {}
    for e in events:
        if e["python"]:
            python.setdefault(e["tid"], []).append((e["start_us"], e["end_us"], e["name"]))
            continue
        if e["device"] != "cpu":
            acts.append(Activity(_activity_kind(e["name"]), e["name"], e["start_us"], e["end_us"], None,
                                 e["linked_id"]))
            continue
        m = _WINDOW.match(e["name"])
        if m:
            wins.append((e["start_us"], e["end_us"], e["name"]))
            continue
        ops.append(Op(e["name"], e["tid"], e["start_us"], e["end_us"], tuple(e["stack"]), e["id"],
                      tuple(e["dtypes"])))
    if python:
        ops = _stacks_from_python(ops, python)
    return _profile(ops, acts, wins, cuda, tensor_cores)


def _profile(ops: list[Op], acts: list[Activity], wins: list[tuple[float, float, str]], cuda: bool,
             tensor_cores: Optional[bool]) -> Profile:
    wins.sort()
    if not wins and ops:  # no step marks: the whole profile is one step
        wins = [(min(o.start_us for o in ops), max(o.end_us for o in ops), "the whole trace")]
    return Profile(sorted(ops, key=lambda o: (o.tid, o.start_us, -o.end_us)), sorted(acts, key=lambda a: a.start_us),
                   [(a, b) for a, b, _ in wins], [n for _, _, n in wins], any(o.stack for o in ops),
                   cuda or bool(acts), tensor_cores)


def from_trace(data: Any, where: str = "trace") -> tuple[Profile, str, int]:
    """(Profile, format, event count) of a torch.profiler Chrome trace
    (export_chrome_trace's JSON, already loaded). Raises ValueError naming
    `where` and what is wrong when it is not one."""
    if isinstance(data, dict):
        events, fmt = data.get("traceEvents"), "kineto"
        props = data.get("deviceProperties") or []
    else:
        events, fmt, props = data, "legacy", []
    if not isinstance(events, list):
        raise ValueError(f"{where}: not a Chrome trace (a JSON object with a 'traceEvents' list, or a list of events)")
    ops: list[Op] = []
    acts: list[Activity] = []
    wins: list[tuple[float, float, str]] = []
    python: dict[int, list[tuple[float, float, str]]] = {}
    threads: dict[tuple[str, str], int] = {}   # (pid, tid) as the trace names them -> one thread id
    for i, e in enumerate(events):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        try:
            name, ts, dur = str(e["name"]), float(e["ts"]), float(e.get("dur", 0.0))
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{where}: traceEvents[{i}]: a complete event needs a name, ts and dur ({err})") from err
        args: dict[str, Any] = e["args"] if isinstance(e.get("args"), dict) else {}
        cat = str(e.get("cat") or "").lower()
        tid = threads.setdefault((str(e.get("pid")), str(e.get("tid", 0))), len(threads) + 1)
        ext = args.get("External id", args.get("external id"))
        ext = ext if isinstance(ext, int) else None
        if cat in ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"):
            acts.append(Activity(_activity_kind(name, cat), name, ts, ts + dur,
                                 args.get("bytes") if isinstance(args.get("bytes"), int) else None, ext))
        elif cat == "python_function":
            python.setdefault(tid, []).append((ts, ts + dur, name))
        elif _WINDOW.match(name) and cat in ("", "user_annotation", "cpu_op"):
            wins.append((ts, ts + dur, name))
        elif cat in ("cpu_op", "operator") or (not cat and "::" in name):
            stack = args.get("Call stack")
            frames = tuple(f for f in stack.split(";") if f) if isinstance(stack, str) else ()
            dtypes = args.get("Input type")
            ops.append(Op(name, tid, ts, ts + dur, frames, ext,
                          tuple(str(d) for d in dtypes) if isinstance(dtypes, list) else (),
                          args.get(EXACT_ARG) == 1))
    if python:
        ops = _stacks_from_python(ops, python)
    major = [p.get("computeMajor") for p in props if isinstance(p, dict)]
    tensor_cores = (max(m for m in major if isinstance(m, int)) >= 7) if any(isinstance(m, int) for m in major) \
        else None
    return _profile(ops, acts, wins, bool(acts) or bool(props), tensor_cores), fmt, len(events)


def _stacks_from_python(ops: list[Op], python: dict[int, list[tuple[float, float, str]]]) -> list[Op]:
    """Each op's Python stack: the python_function events on its thread
    that enclose it, innermost (latest start) first."""
    out = []
    for op in ops:
        if op.stack:
            out.append(op)
            continue
        enclosing = [f for f in python.get(op.tid, []) if f[0] <= op.start_us and f[1] >= op.end_us]
        enclosing.sort(key=lambda f: f[0], reverse=True)
        out.append(op._replace(stack=tuple(f[2] for f in enclosing)))
    return out


# -- where in the user's code -------------------------------------------------------------------
def _is_library(path: str) -> bool:
    p = "/" + path.replace("\\", "/")
    if any(f"/{lib}/" in p for lib in _LIBRARIES) or p.startswith("/<"):
        return True
    # Installed: under site-packages, or as the profiler names a frame,
    # relative to the sys.path entry it was imported from ("ray/...").
    if any(f"-packages/{lib}/" in p or (not os.path.isabs(path) and p.startswith(f"/{lib}/")) for lib in _FRAMEWORKS):
        return True
    # The standard library (contextlib's wrappers around a `with`), not site-packages.
    return bool(re.search(r"/lib/python3(\.\d+)?/", p)) and "-packages/" not in p


def user_frame(stack: tuple[str, ...]) -> tuple[Optional[str], Optional[int], Optional[str]]:
    """(file, line, function) of the first frame, innermost first, outside
    torch, feedline and the standard library; (None, None, None) if none."""
    for f in stack:
        m = _FRAME.match(f)
        if m and not _is_library(m.group(1)):
            return m.group(1), int(m.group(2)), m.group(3)
    return None, None, None


# -- a call's own line, from the source, where the profile names only its function ----------------
# The calls each sync kind is made by, as the source spells them: the attribute called.
_SOURCE_CALLS = {"item": {"item"}, "tolist": {"tolist"}, "cpu": {"cpu"}, "numpy": {"numpy"},
                 "nonzero": {"nonzero", "masked_select", "unique", "unique_consecutive"}}


def _source_file(file: str, dirs: tuple[str, ...]) -> Optional[str]:
    """`file` as a profiler stack names it (absolute, or relative to an
    entry of the profiled process's sys.path, which torch strips), found on
    this machine: as given, or under one of `dirs` (the trace's folder, the
    working directory, this process's sys.path)."""
    if os.path.isabs(file):
        return file if os.path.isfile(file) else None
    for d in (*dirs, os.getcwd(), *sys.path):
        path = os.path.join(d or ".", file)
        if os.path.isfile(path):
            return os.path.abspath(path)
    return None


def _calls_in(node: Any, kind: str) -> list[int]:
    """Lines of the calls of `kind` in `node`'s own body (not in functions,
    lambdas or classes defined inside it, which are frames of their own)."""
    names = _SOURCE_CALLS.get(kind)
    out: list[int] = []
    todo = list(ast.iter_child_nodes(node))
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(n, ast.Call):
            f = n.func
            if (names is not None and isinstance(f, ast.Attribute) and f.attr in names) or \
                    (kind == "print" and isinstance(f, ast.Name) and f.id == "print"):
                out.append(n.lineno)
        todo.extend(ast.iter_child_nodes(n))
    return sorted(set(out))


def source_call_line(file: Optional[str], line: Optional[int], function: Optional[str], kind: str,
                     dirs: tuple[str, ...] = ()) -> Optional[int]:
    """The line of the one call of `kind` (`.item()`, `.tolist()`, `print`,
    ...) inside `function` of `file`, read from the source with `ast`, or
    None when the file is not here, the function is not found or it makes
    no such call or several. A profiler's stack names a frame by its
    function and a line that is not the call's (the function's first line,
    or the line running when the tracer started), so an offline trace needs
    this to name the line the live run names. Functions of that name are
    told apart by which one spans `line`."""
    if not file or not function or kind not in (*_SOURCE_CALLS, "print"):
        return None
    path = _source_file(file, dirs)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None
    if function == "<module>":
        scopes: list[Any] = [tree]
    else:
        scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.name == function]
        if len(scopes) > 1 and line is not None:
            def first(n: Any) -> int:
                return min([n.lineno] + [d.lineno for d in n.decorator_list])
            scopes = [n for n in scopes if first(n) <= line <= (n.end_lineno or n.lineno)]
    if len(scopes) != 1:
        return None
    lines = _calls_in(scopes[0], kind)
    return lines[0] if len(lines) == 1 else None


def _sync_kind(op: Op, launched: list[Activity]) -> Optional[str]:
    """Why this top-level op makes the host wait for the device, or None."""
    for f in op.stack:
        m = _FRAME.match(f)
        if m and ("torch/_tensor_str.py" in m.group(1).replace("\\", "/")
                  or (m.group(1).replace("\\", "/").endswith("torch/_tensor.py")
                      and m.group(3) in ("__repr__", "__format__", "__str__"))):
            return "print"
    call = next((m.group(1) for f in op.stack if (m := _CCALL.match(f))), None)
    if op.name in _SYNC_OPS:
        return "tolist" if call == "tolist" else _SYNC_OPS[op.name]
    if call in _SYNC_CALLS and (call != "cpu" or op.name in _COPY_OPS):
        return "bool" if call == "__bool__" else call
    if op.name in _COPY_OPS and any(a.kind == "memcpy" and "DtoH" in a.name for a in launched):
        return "cpu"
    return None


# -- the anatomy ----------------------------------------------------------------------------------
def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _top_level(ops: list[Op]) -> list[tuple[Op, list[Op]]]:
    """Ops not inside another op on their thread (an op is a name with a
    namespace, "aten::mm"; record_function ranges are not ops), each with
    the ops nested inside it. `ops` sorted by (tid, start, -end)."""
    out: list[tuple[Op, list[Op]]] = []
    for op in ops:
        if "::" not in op.name:
            continue
        if out and out[-1][0].tid == op.tid and op.start_us >= out[-1][0].start_us and op.end_us <= out[-1][0].end_us:
            out[-1][1].append(op)
        else:
            out.append((op, []))
    return out


def _window_of(t: float, windows: list[tuple[float, float]]) -> Optional[int]:
    for i, (a, b) in enumerate(windows):
        if a <= t <= b:
            return i
    return None


def anatomy(p: Profile, source: str, window: Optional[str] = None,
            source_dirs: tuple[str, ...] = ()) -> Optional[StepAnatomy]:
    """The step anatomy of a Profile; None when it holds no op in a step."""
    if not p.windows:
        return None
    steps = len(p.windows)
    wall = sum(b - a for a, b in p.windows)
    top = [(op, inner, w) for op, inner in _top_level(p.ops)
           if (w := _window_of(op.start_us, p.windows)) is not None]
    if not top or wall <= 0:
        return None
    inside = 0.0
    for a, b in p.windows:
        for x, y in _union([(max(a, op.start_us), min(b, op.end_us)) for op, _, _ in top]):
            inside += max(0.0, y - x)
    by_ext: dict[int, list[Activity]] = {}
    for act in p.activities:
        if act.ext_id is not None:
            by_ext.setdefault(act.ext_id, []).append(act)
    names: dict[str, list[float]] = {}
    syncs: dict[tuple[str, Optional[str], Optional[int]], dict[str, Any]] = {}
    copies: dict[tuple[str, str, Optional[str], Optional[int]], dict[str, Any]] = {}
    dtypes: set[str] = set()
    for op, inner, w in top:
        dur = op.end_us - op.start_us
        agg = names.setdefault(op.name, [0, 0.0])
        agg[0] += 1
        agg[1] += dur
        launched = [a for o in (op, *inner) if o.ext_id is not None for a in by_ext.get(o.ext_id, [])]
        for o in (op, *inner):
            if o.name in _MATMUL and o.dtypes:
                dtypes.add(o.dtypes[0])
        file, line, fn = user_frame(op.stack)
        kind = _sync_kind(op, launched)
        if kind is not None:
            key = (kind, file, line)
            s = syncs.setdefault(key, {"op": op.name, "function": fn, "calls": 0, "steps": set(), "us": 0.0,
                                       "exact": op.exact})
            s["calls"] += 1
            s["steps"].add(w)
            s["us"] += dur
        for act in launched:
            if act.kind != "memcpy":
                continue
            direction = "h2d" if "HtoD" in act.name else "d2h" if "DtoH" in act.name else "d2d"
            memory = "pageable" if "Pageable" in act.name else "pinned" if "Pinned" in act.name else "unknown"
            c = copies.setdefault((direction, memory, file, line), {"calls": 0, "bytes": 0, "us": 0.0, "sized": True})
            c["calls"] += 1
            c["us"] += act.end_us - act.start_us
            if act.bytes is None:
                c["sized"] = False
            else:
                c["bytes"] += act.bytes
    top_ops = sorted(names.items(), key=lambda kv: -kv[1][1])[:8]
    device = None
    if p.activities:
        in_win = [(max(a, act.start_us), min(b, act.end_us)) for act in p.activities for a, b in p.windows
                  if act.end_us > a and act.start_us < b]
        merged = _union(in_win)
        busy = sum(y - x for x, y in merged)
        kernels = [act for act in p.activities
                   if act.kind == "kernel" and _window_of(act.start_us, p.windows) is not None]
        device = DeviceBusy(busy_s=busy / 1e6, idle_s=max(0.0, wall - busy) / 1e6, busy_share=busy / wall,
                            gaps=max(0, len(merged) - steps), kernels_per_step=len(kernels) / steps,
                            kernel_mean_s=(sum(k.end_us - k.start_us for k in kernels) / len(kernels) / 1e6)
                            if kernels else None)
    note = None
    if not p.cuda:
        note = ("CPU-only: no host-to-device copy to classify as pageable or pinned; on a GPU the profile's "
                "copy activity (Memcpy HtoD, Pageable or Pinned) names them.")
    elif not p.activities:
        note = "No device activity in the profile (profile with ProfilerActivity.CUDA): copies not classified."
    n_top = len(top)
    return StepAnatomy(
        source=source, window=window or _window_words(p.window_names), steps=steps, python_stacks=p.stacks,
        step_mean_s=wall / steps / 1e6, ops_mean_s=inside / steps / 1e6, python_share=max(0.0, 1 - inside / wall),
        ops_per_step=n_top / steps, op_mean_s=sum(op.end_us - op.start_us for op, _, _ in top) / n_top / 1e6,
        top_ops=[OpShare(name=k, calls=int(v[0]), total_s=v[1] / 1e6, share=v[1] / wall) for k, v in top_ops],
        syncs=_merged_sites([_exact_from_source(
                   SyncSite(kind=k[0], op=v["op"], file=k[1], line=k[2], function=v["function"], calls=v["calls"],
                            steps_with=len(v["steps"]), per_step_s=v["us"] / steps / 1e6,
                            exact_line=v["exact"] and k[2] is not None), source_dirs)
               for k, v in sorted(syncs.items(), key=lambda kv: (-len(kv[1]["steps"]), -kv[1]["calls"]))]),
        copies=[CopyStat(direction=k[0], memory=k[1], calls=v["calls"], bytes=v["bytes"] if v["sized"] else None,
                         per_step_s=v["us"] / steps / 1e6, file=k[2], line=k[3]) for k, v in copies.items()],
        copies_note=note, cuda=p.cuda, device=device, matmul_dtypes=sorted(dtypes), tensor_cores=p.tensor_cores)


def _exact_from_source(site: SyncSite, dirs: tuple[str, ...]) -> SyncSite:
    """A site whose line the profile does not know exactly, with the call's
    own line where the source names one (source_call_line)."""
    if site.exact_line or site.file is None:
        return site
    line = source_call_line(site.file, site.line, site.function, site.kind, dirs)
    if line is None:
        return site
    return dataclasses.replace(site, line=line, exact_line=True)


def _merged_sites(sites: list[SyncSite]) -> list[SyncSite]:
    """Sites that became one (kind, file, line) once their lines were read
    from the source (one call seen under two stack lines), merged; the order
    kept (most steps first)."""
    out: dict[tuple[str, Optional[str], Optional[int]], SyncSite] = {}
    for s in sites:
        key = (s.kind, s.file, s.line)
        if key in out:
            o = out[key]
            out[key] = dataclasses.replace(o, calls=o.calls + s.calls, steps_with=max(o.steps_with, s.steps_with),
                                           per_step_s=o.per_step_s + s.per_step_s)
        else:
            out[key] = s
    return sorted(out.values(), key=lambda s: (-s.steps_with, -s.calls))


def with_exact_lines(p: Profile, sites: list[tuple[str, str, int, str]]) -> Profile:
    """`p` with the user frame of each syncing op set to the line of the
    call (_torch_compat.SyncCallSites saw it) where the profile's own stack
    only names the function: the most frequent line of that kind of call in
    that function of that file."""
    import collections
    if not sites:
        return p
    ops = []
    for op in p.ops:
        # Only an op called through the wrapper (its frame in the stack) is
        # one of the calls it saw; an op torch calls itself keeps its frame.
        wrapped = any(f.startswith(_WRAPPER) or f"/{_WRAPPER}" in f for f in op.stack)
        kind = _sync_kind(op, []) if "::" in op.name and wrapped else None
        file, line, fn = user_frame(op.stack)
        if kind is None or file is None:
            ops.append(op)
            continue
        lines = collections.Counter((f, ln) for k, f, ln, name in sites
                                    if k == kind and os.path.basename(f) == os.path.basename(file) and name == fn)
        if not lines:
            ops.append(op)
            continue
        (f, ln), _ = lines.most_common(1)[0]
        frame = f"{file}({line}): {fn}"
        stack = tuple(f"{f}({ln}): {fn}" if x == frame else x for x in op.stack)
        ops.append(op._replace(stack=stack, exact=True))
    return p._replace(ops=ops)


def _window_words(names: list[str]) -> str:
    nums = [int(m.group(2)) for n in names if (m := _WINDOW.match(n))]
    if not nums:
        return names[0] if names else "the whole trace"
    prefix = _WINDOW.match(names[0]).group(1) if _WINDOW.match(names[0]) else ""  # type: ignore[union-attr]
    label = "ProfilerStep" if prefix.startswith("ProfilerStep") else "profiled steps"
    sep = "#" if label == "ProfilerStep" else " "
    return f"{label}{sep}{min(nums)}-{max(nums)}" if len(nums) > 1 else f"{label}{sep}{nums[0]}"


# -- writing (the doctor's own trace) ----------------------------------------------------------------
def trace_events(p: Profile, pid: int, offset_us: float) -> list[dict[str, Any]]:
    """The profile as Kineto-form trace events (what from_trace reads back):
    step windows as user annotations, ops as cpu_op with their stack in a
    `Call stack` argument, device activity on its own track."""
    ev: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": pid,
                                 "args": {"name": "step profile (torch.profiler)"}}]
    tids: dict[int, int] = {}
    first_tid = p.ops[0].tid if p.ops else 0
    for (a, b), name in zip(p.windows, p.window_names):
        ev.append({"name": name, "cat": "user_annotation", "ph": "X", "ts": round(a + offset_us, 3),
                   "dur": round(b - a, 3), "pid": pid, "tid": 1})
    for op in p.ops:
        tid = tids.setdefault(op.tid, 1 if op.tid == first_tid else len(tids) + 2)
        args: dict[str, Any] = {}
        if op.ext_id is not None:
            args["External id"] = op.ext_id
        if op.stack:
            args["Call stack"] = ";".join(op.stack)
        if op.dtypes:
            args["Input type"] = list(op.dtypes)
        if op.exact:
            args[EXACT_ARG] = 1
        ev.append({"name": op.name, "cat": "cpu_op", "ph": "X", "ts": round(op.start_us + offset_us, 3),
                   "dur": round(op.end_us - op.start_us, 3), "pid": pid, "tid": tid, "args": args})
    for act in p.activities:
        args = {} if act.ext_id is None else {"External id": act.ext_id}
        if act.bytes is not None:
            args["bytes"] = act.bytes
        ev.append({"name": act.name, "cat": {"memcpy": "gpu_memcpy", "memset": "gpu_memset"}.get(act.kind, "kernel"),
                   "ph": "X", "ts": round(act.start_us + offset_us, 3), "dur": round(act.end_us - act.start_us, 3),
                   "pid": pid, "tid": 1000, "args": args})
    return ev


# -- profiling a watched loop -------------------------------------------------------------------------
class StepProfiler:
    """Profiles `steps` steps of a watched loop (Doctor(profile_steps=N)):
    the first N after the first epoch's warm-up, each inside a
    `feedline.doctor.step#K` range (K the loop's own 1-based step number),
    from the yield of its batch until the loop asks for the next one. The
    profiler slows the steps it records, so the Doctor leaves them out of
    the loop's timings."""

    def __init__(self, steps: int) -> None:
        if steps < 0:
            raise ValueError(f"profile_steps must be >= 0, got {steps}")
        self.steps = steps
        self.done = 0
        self.profile: Optional[Profile] = None
        self.error: Optional[str] = None
        self._prof: Any = None
        self._range: Any = None
        self._cuda = False
        self.t_first: Optional[float] = None   # perf_counter at the first profiled step's start
        self._sites: Any = None                # _torch_compat.SyncCallSites while profiling
        self.call_sites: list[tuple[str, str, int, str]] = []

    def begin_step(self, number: int, cuda: bool, now: float) -> bool:
        """Called as step `number` starts; True when it is profiled."""
        if self.done >= self.steps or self.profile is not None or self.error is not None:
            return False
        from . import _torch_compat
        try:
            if self._prof is None:
                self._cuda = cuda
                self._prof = _torch_compat.start_step_profiler(cuda)
                self._sites = _torch_compat.SyncCallSites(_is_library)
                self._sites.install()
                self.t_first = now
            self._range = _torch_compat.record_step(f"{STEP_MARK}{number}")
        except Exception as e:  # noqa: BLE001 - another profiler running, no torch: no step anatomy, said why
            self.error = f"torch.profiler could not start: {type(e).__name__}: {e}"
            self._prof = None
            return False
        return True

    def end_step(self) -> None:
        if self._range is not None:
            self._range.__exit__(None, None, None)
            self._range = None
            self.done += 1
        if self.done >= self.steps:
            self.finish()

    def finish(self) -> None:
        """Stops the profiler (at the N-th step, or when the epoch ends first)."""
        if self._prof is None:
            return
        from . import _torch_compat
        if self._range is not None:
            self._range.__exit__(None, None, None)
            self._range = None
        prof, self._prof = self._prof, None
        if self._sites is not None:
            self._sites.remove()
            self.call_sites, self._sites = self._sites.calls, None
        events = _torch_compat.stop_step_profiler(prof)
        self.profile = with_exact_lines(
            from_events(events, self._cuda, _torch_compat.tensor_cores() if self._cuda else None), self.call_sites)
