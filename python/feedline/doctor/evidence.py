"""What the doctor measured, as typed records: the one place the report's
JSON schema lives (docs/doctor.md, "JSON schema" and "Where things go").

Two kinds of record:

- raw measurements, NamedTuples made on the hot path and shipped between
  processes (Step, CpuPoint; the torch probes' SampleTiming, TransformTiming,
  CollateTiming, ...): cheap, picklable, read by field name;
- report sections, dataclasses deriving from Record, whose fields are the
  JSON keys in the report's order. Record.to_json() gives the section as the
  report writes it and Record.from_json() reads it back; a field whose value
  is ABSENT is left out of the JSON (a key the report only sometimes has).

The rules (rules/) read the JSON form, so that a saved report can be
re-diagnosed without this module knowing how it was made.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, ClassVar, NamedTuple, Optional, TypeVar, Union

JSON = Any  # a value json.dumps accepts


class _Absent:
    """The value of a field the report leaves out (not the same as null)."""

    _instance: ClassVar[Optional[_Absent]] = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = object.__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()
R = TypeVar("R", bound="Record")


def to_json(x: Any) -> JSON:
    """A record (or a list / dict holding records) as JSON values."""
    if isinstance(x, Record):
        return x.to_json()
    if isinstance(x, list):
        return [to_json(v) for v in x]
    if isinstance(x, dict):
        return {k: to_json(v) for k, v in x.items()}
    return x


def _from_json(hint: Any, value: Any, where: str) -> Any:
    """`value` read as type `hint`: records rebuilt, everything else as is."""
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin is Union or origin is types.UnionType:
        records = [a for a in typing.get_args(hint) if isinstance(a, type) and issubclass(a, Record)]
        return records[0].from_json(value, where) if records and isinstance(value, dict) else value
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        if not isinstance(value, list):
            raise ValueError(f"{where}: {type(value).__name__} is not a list")
        return [_from_json(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(hint, type) and issubclass(hint, Record):
        return hint.from_json(value, where)
    return value


@dataclasses.dataclass
class Record:
    """A report section: fields are its JSON keys, in order."""

    def to_json(self) -> dict[str, JSON]:
        return {f.name: to_json(v) for f in dataclasses.fields(self)
                if (v := getattr(self, f.name)) is not ABSENT}

    @classmethod
    def from_json(cls: type[R], data: dict[str, JSON], where: str = "") -> R:
        """The record a to_json() dict describes. Raises ValueError naming
        the section and key of a field it does not know or misses."""
        where = where or cls.__name__
        if not isinstance(data, dict):
            raise ValueError(f"{where}: {type(data).__name__} is not an object")
        hints = typing.get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = [k for k in data if k not in names]
        if unknown:
            raise ValueError(f"{where}: unknown field '{unknown[0]}'")
        kw: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in data:
                kw[f.name] = _from_json(hints[f.name], data[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(f"{where}: missing '{f.name}'")
        return cls(**kw)

    @classmethod
    def keys(cls) -> list[str]:
        """The JSON keys this section can have, in order."""
        return [f.name for f in dataclasses.fields(cls)]


# -- raw measurements ------------------------------------------------------------------
class Step(NamedTuple):
    """One step of the watched loop: when it asked for a batch, how long it
    waited, how long the step took; the training thread's CPU seconds in the
    step and in next(), and the whole training process's over the period."""
    t_request: float
    wait_s: float
    step_s: float
    samples: int
    step_cpu_s: float
    receive_cpu_s: float
    epoch: int
    process_cpu_s: float
    tokens: int = 0       # a token batch's tokens (doctor/tokens.py); 0 for any other batch


class CpuPoint(NamedTuple):
    """A point of the CPU window: wall clock, the machine's busy CPU seconds
    (None without /proc/stat), this process's CPU seconds, steps so far."""
    wall: float
    system_busy_s: Optional[float]
    process_cpu_s: float
    steps: int


class SampleTiming(NamedTuple):
    """One sample made by a timed dataset call (probes.py), in its process."""
    t0: float
    wall_s: float
    cpu_s: float
    runq_s: float
    dataset_index: int    # -1 when not an int (an iterable's item)


class TransformTiming(NamedTuple):
    """One Compose entry run on one sample (probes.TimedTransform)."""
    sample_no: int        # the sample of the batch it ran under
    transform: int        # its index in the Compose
    t0: float
    wall_s: float
    cpu_s: float
    runq_s: float
    input_pixels: int     # 0 when the input has no size


class CollateTiming(NamedTuple):
    t0: float
    wall_s: float
    cpu_s: float
    runq_s: float


class MemorySample(NamedTuple):
    """Bytes of one process: RSS, PSS (shared pages counted once), private."""
    rss: int
    pss: int
    private: int


class InitTiming(NamedTuple):
    """worker_init_fn: when it started, how long it took, memory before it."""
    t0: float
    wall_s: float
    memory: MemorySample


class PinTiming(NamedTuple):
    t0: float
    wall_s: float


def warmup_steps(skip: int, epoch_steps: int) -> int:
    """The steps at the start of an epoch that steady state leaves out:
    `skip` (start-up, warm-up, the batches prepared ahead that the loop takes
    at once), but a short epoch keeps at least three quarters of its steps.
    The one warm-up rule, for the host's timings and the device's."""
    return min(skip, max(1, epoch_steps // 4))


def steady_mask(epochs: list[int], skip: int) -> list[bool]:
    """For steps belonging to `epochs` (one epoch index per step, in order):
    whether each is in steady state (warmup_steps of its epoch left out)."""
    per_epoch: dict[int, int] = {}
    for e in epochs:
        per_epoch[e] = per_epoch.get(e, 0) + 1
    seen: dict[int, int] = {}
    out = []
    for e in epochs:
        seen[e] = seen.get(e, 0) + 1
        out.append(seen[e] > warmup_steps(skip, per_epoch[e]))
    return out


# -- the machine and the loader -----------------------------------------------------------
@dataclasses.dataclass
class Machine(Record):
    cores: int
    cpu: str
    cuda: bool = False
    gpu: Optional[str] = None
    mem_total_bytes: Optional[int] = None
    mem_available_bytes: Optional[int] = None
    other_cpu_cores: Optional[float] = ABSENT  # loop mode only


@dataclasses.dataclass
class LoaderInfo(Record):
    kind: str                      # "torch", "feedline" or "iterable"
    type: Optional[str] = None
    batch_size: Optional[int] = None
    settings: dict[str, JSON] = dataclasses.field(default_factory=dict)  # free-form, per kind


# -- the loop ---------------------------------------------------------------------------------
@dataclasses.dataclass
class DeviceTiming(Record):
    timed: bool
    steps: int
    steady_steps: int
    busy_s: float
    idle_s: float
    starvation: float


@dataclasses.dataclass
class Epoch(Record):
    index: int
    steps: int
    samples: int
    wall_s: float
    first_batch_s: Optional[float]


@dataclasses.dataclass
class LoopSite(Record):
    """The loop a framework runs and the user's code its step calls
    (feedline.integrations): what the report names as the place, rather
    than the framework's own internals."""
    framework: str                 # "Lightning", "Accelerate", "Transformers", "torchtitan"
    version: Optional[str]
    loop: str                      # the framework's loop: "Trainer.fit", "Trainer.train"
    step: Optional[str] = None     # the user's step: "Net.training_step"
    file: Optional[str] = None     # where the step is defined
    line: Optional[int] = None


@dataclasses.dataclass
class Loop(Record):
    steps: int
    samples: int
    epochs: int
    wall_s: float
    wait_s: float
    step_s: float
    starvation: float
    samples_per_s: float
    steady_samples_per_s: Optional[float]
    steady_starvation: Optional[float]
    wait_mean_s: float
    step_mean_s: float
    step_cpu_mean_s: float
    receive_cpu_mean_s: float
    process_cpu_mean_s: float
    device: Optional[DeviceTiming]
    epoch_list: list[Epoch]
    # The steady-state window every steady figure is over (rules.common.window):
    # its steps, in words ("steps 4-200" or, over several epochs, "each epoch
    # after its first 3 steps"), and the step's mean over it.
    steady_steps: Optional[int] = ABSENT
    steady_window: Optional[str] = ABSENT
    steady_step_mean_s: Optional[float] = ABSENT
    site: Optional[LoopSite] = ABSENT  # run inside a framework's loop


# -- a torch DataLoader ------------------------------------------------------------------------
@dataclasses.dataclass
class Times(Record):
    """Per sample: wall time, CPU time, run-queue wait, blocked (the rest)."""
    wall_s: float
    cpu_s: float
    runq_s: float
    blocked_s: float


@dataclasses.dataclass
class TransformTimes(Record):
    index: int
    name: str
    wall_s: float
    cpu_s: float
    runq_s: float
    input_pixels: Optional[float]


@dataclasses.dataclass
class BatchTimes(Record):
    collate_s: float
    collate_cpu_s: float
    collate_runq_s: float
    collate_reference_s: Optional[float]
    worker_s: float
    worker_overhead_s: float
    worker_gap_s: Optional[float]
    worker_hidden_cpu_s: Optional[float]
    pin_s: Optional[float]
    receive_s: Optional[float]
    bytes: int


@dataclasses.dataclass
class WorkerRecord(Record):
    pid: int
    worker: int
    batches: int
    busy_s: float
    rss_max: int = ABSENT          # present once the worker sampled its memory
    pss_max: int = ABSENT
    private_growth: int = ABSENT


@dataclasses.dataclass
class WorkerPool(Record):
    count: int
    processes: int
    busy_s: float
    utilisation: Optional[float]
    list: list[WorkerRecord]


@dataclasses.dataclass
class Startup(Record):
    worker_init_s: Optional[float]


@dataclasses.dataclass
class Memory(Record):
    main_rss: int
    main_pss: int
    workers_pss: int
    max_private_growth: int


@dataclasses.dataclass
class ImageInfo(Record):
    output_hw: Optional[list[int]]
    decoded_pixels: Optional[float]
    decoded_aspect: Optional[float]


@dataclasses.dataclass
class Files(Record):
    count: int = ABSENT            # both absent when the dataset lists no files
    mean_bytes: float = ABSENT


@dataclasses.dataclass
class HostToDevice(Record):
    pageable_s: float
    pinned_s: float
    pin_s: float


@dataclasses.dataclass
class TorchEvidence(Record):
    samples_timed: int
    batches_timed: int
    samples_per_batch: float
    sample: Times
    load: Times
    transforms: list[TransformTimes]
    batch: BatchTimes
    workers: WorkerPool
    startup: Startup
    memory: Memory
    image: ImageInfo
    files: Files
    h2d: HostToDevice = ABSENT     # with CUDA, once measured


# -- a feedline Loader -------------------------------------------------------------------------
@dataclasses.dataclass
class OpTimes(Record):
    """One op of the engine's chain: its items and the threads' busy time in
    it. A Python op (a Compose member, map=; docs/python_ops.md) also says how
    long its calls waited for the Python-op lock and the GIL and how long they
    held them: Python ops never overlap, so the held time is serial."""
    name: str
    items: int
    busy_s: float
    errors: int
    per_item_s: float
    python: bool = False
    gil_wait_s: float = ABSENT     # Python ops only
    gil_held_s: float = ABSENT


@dataclasses.dataclass
class ErrorCounts(Record):
    total: int
    skipped: int


@dataclasses.dataclass
class ObjectStore(Record):
    """The object-store requests of the measured window (feedline._C.object_store_stats
    deltas, every s3:// reader of the process): what tells storage-bound from decode-bound
    on remote data."""
    requests: int
    retries: int
    gets: int
    bytes: int
    wall_s: float                  # the window
    request_s: float               # mean time of a request, sent to done
    first_byte_s: float            # mean over GETs, sent to first byte: the store's latency
    bytes_per_s_per_connection: float  # bytes over the summed request time
    concurrency: float             # requests in flight on average (summed request time / wall)
    peak_in_flight: int            # since the process started


@dataclasses.dataclass
class Tuner(Record):
    """What the autotuner chose and why (docs/tuner.md); the keys stats() has."""
    threads_auto: bool = ABSENT
    ring_auto: bool = ABSENT
    read_ahead_auto: bool = ABSENT
    cpu_budget: JSON = ABSENT
    ram_budget: JSON = ABSENT
    threads: int = ABSENT
    max_threads: int = ABSENT
    ring_depth: int = ABSENT
    max_ring_depth: int = ABSENT
    read_ahead_in_flight: int = ABSENT
    read_ahead_bytes: int = ABSENT
    charged_bytes: int = ABSENT
    peak_charged_bytes: int = ABSENT
    changes: int = ABSENT
    log: list[str] = ABSENT


@dataclasses.dataclass
class FeedlineEvidence(Record):
    num_threads: int
    uptime_s: float
    ops: list[OpTimes]
    samples: int
    busy_s: float
    wait_input_s: float
    blocked_output_s: float
    utilisation: Optional[float]
    consumer_wait_s: float
    ring: dict[str, JSON]          # free-form: the engine's ring counters
    errors: ErrorCounts
    tuner: Optional[Tuner]
    object_store: Optional[ObjectStore] = None  # s3:// sources only
    source_kind: str = ABSENT      # added by the probe (not by a bare stats delta)
    exact_decode: bool = ABSENT


# -- a language-model loop (doctor/tokens.py) ---------------------------------------------------
@dataclasses.dataclass
class TokenSource(Record):
    path: str
    kind: str                      # "flat", "megatron" or "token_shards"
    num_tokens: int


@dataclasses.dataclass
class TokenLoaderStats(Record):
    """A feedline.TokenLoader's own figures (its stats()["tokens"])."""
    packing: str                   # "concat" or "best_fit"
    seq_len: int
    num_tokens: int                # in its sources
    num_windows: int               # sequences per epoch, all ranks
    tail_tokens: int               # concat: after the last whole window, never a label
    padding_share: float           # best_fit: pad tokens / tokens of an epoch's sequences; concat 0
    sources: list[TokenSource]     # each file of each source, in order
    weights: list[float] = ABSENT  # a mixture's current weights


@dataclasses.dataclass
class TokenEvidence(Record):
    """Tokens through the loop, for batches with token ids (doctor/tokens.py)."""
    field: str                     # "input_ids" (a dict) or "x" (an (x, y) pair)
    seq_len: int                   # of the first batch
    tokens: int                    # over every step watched, padding included
    tokens_per_sample: Optional[float]
    tokens_per_s: float            # over loop.wall_s (the window of loop.samples_per_s)
    steady_tokens_per_s: Optional[float]  # over the steady state (loop.steady_samples_per_s's)
    loader: Optional[TokenLoaderStats]    # a feedline.TokenLoader's; null for any other loader
    real_tokens_per_s: float = ABSENT     # with padding: the steady rate less the padding share


# -- what the probes attached ---------------------------------------------------------------------
@dataclasses.dataclass
class NotAttached(Record):
    part: str
    reason: str


@dataclasses.dataclass
class ProbeStatus(Record):
    torch_version: str
    mode: str                      # "probes" or "outside"
    attached: list[str]
    not_attached: list[NotAttached]


# -- derived sections --------------------------------------------------------------------------
@dataclasses.dataclass
class Stage(Record):
    name: str
    where: str
    per_batch_s: float
    cpu_s: Optional[float] = None
    blocked_s: Optional[float] = None


@dataclasses.dataclass
class Estimate(Record):
    value: Optional[float]
    source: Optional[str]          # "measured", "model", "loop", "target"


@dataclasses.dataclass
class Capacity(Record):
    loop_samples_per_s: Optional[float]
    bound: Optional[str]
    model_samples_per_s: Optional[float] = ABSENT   # loop mode only
    model_error: Optional[float] = ABSENT
    loader_samples_per_s: Estimate = ABSENT
    step_samples_per_s: Estimate = ABSENT


TIMELINE_COLUMNS = ["start_s", "wait_s", "step_s", "samples", "epoch"]


@dataclasses.dataclass
class Timeline(Record):
    columns: list[str]
    rows: list[list[float]]


# -- the pipeline alone (the CLI) -----------------------------------------------------------------
@dataclasses.dataclass
class StageTime(Record):
    name: str
    per_sample_s: float


@dataclasses.dataclass
class ScanRun(Record):
    threads: int
    samples: int
    seconds: float
    samples_per_s: float
    stages: list[StageTime]
    utilisation: Optional[float]
    waits: list[list[float]]       # [start_s, wait_s] per timed batch


@dataclasses.dataclass
class PipelineInfo(Record):
    source: str
    batch_size: int
    transform: str
    size: int
    batches: int
    summary: dict[str, JSON]       # rules.diagnose_pipeline's summary


# -- inside the step (step_profile.py: Doctor(profile_steps=N) or a saved trace) ----------------
@dataclasses.dataclass
class OpShare(Record):
    """One op name among the step's top-level ops (not counting ops inside ops)."""
    name: str
    calls: int
    total_s: float
    share: float                   # of the profiled steps' wall time


@dataclasses.dataclass
class SyncSite(Record):
    """Where the user's code makes the host wait for the device: an op that
    needs a value on the host, with the first frame outside torch and feedline."""
    kind: str                      # "item", "print", "tolist", "cpu", "numpy", "nonzero", "bool"
    op: str                        # the op that syncs (aten::item, aten::nonzero, ...)
    file: Optional[str]
    line: Optional[int]
    function: Optional[str]
    calls: int
    steps_with: int                # profiled steps in which it ran at least once
    per_step_s: float              # time inside those ops, per profiled step
    exact_line: bool = False       # line is the call's; False: where the function starts (a profiler stack)


@dataclasses.dataclass
class CopyStat(Record):
    direction: str                 # "h2d", "d2h", "d2d"
    memory: str                    # "pageable", "pinned" or "unknown"
    calls: int
    bytes: Optional[int]
    per_step_s: float              # device time of the copies, per profiled step
    file: Optional[str]
    line: Optional[int]


@dataclasses.dataclass
class DeviceBusy(Record):
    """The device over the profiled steps (CUDA activity in the profile)."""
    busy_s: float
    idle_s: float
    busy_share: float
    gaps: int                      # idle gaps between device activities, over all steps
    kernels_per_step: float
    kernel_mean_s: Optional[float]


@dataclasses.dataclass
class StepAnatomy(Record):
    source: str                    # "profile" (Doctor(profile_steps=N)) or "trace" (a saved trace)
    window: str                    # which steps, in words ("profiled steps 4-8", "ProfilerStep#2-#6")
    steps: int
    python_stacks: bool            # the profile has Python stacks (with_stack=True)
    step_mean_s: float             # wall time of a step, under the profiler
    ops_mean_s: float              # of it inside ops (any thread)
    python_share: float            # the rest: Python and everything outside ops
    ops_per_step: float            # top-level ops
    op_mean_s: Optional[float]
    top_ops: list[OpShare]
    syncs: list[SyncSite]
    copies: list[CopyStat]
    copies_note: Optional[str]     # what could not be classified, and why
    cuda: bool
    device: Optional[DeviceBusy]
    matmul_dtypes: list[str]       # input dtypes of matmul / conv ops ([]: not recorded)
    tensor_cores: Optional[bool]   # the GPU has tensor cores (compute capability >= 7); None: unknown
    trace_file: str = ABSENT       # source "trace": the file read


@dataclasses.dataclass
class TraceInfo(Record):
    """Trace mode: the file read, its format, what it holds."""
    path: str
    format: str                    # "kineto" (a JSON object) or "legacy" (a list of events)
    events: int


# -- what feedline would give (what_if.py: Doctor(what_if=True)) -------------------------------
@dataclasses.dataclass
class WhatIf(Record):
    """feedline's equivalent of the watched DataLoader, run on a sample of its files."""
    ran: bool
    reason: Optional[str]          # why it did not run (or failed); null when it ran
    dataset: Optional[str] = None  # the dataset class it recognised
    root: Optional[str] = None
    files: Optional[int] = None    # files in the sample
    batch_size: Optional[int] = None
    transform: Optional[str] = None  # the native translation, in words
    threads: Optional[int] = None  # feedline.Loader's threads at the end
    samples: Optional[int] = None  # timed (after the first batch)
    seconds: Optional[float] = None
    samples_per_s: Optional[float] = None
    code: Optional[str] = None     # the change to make
    notes: list[str] = dataclasses.field(default_factory=list)


# -- across ranks (torch.distributed: Doctor.report() gathers every rank's) -----------------------
@dataclasses.dataclass
class RankRow(Record):
    """One rank's loop, over its steady state."""
    rank: int
    host: str
    pid: int
    steps: int
    samples: int
    wait_mean_s: float             # waiting for data, per step
    step_mean_s: float             # the step, per step (waits at collectives included)
    collective_mean_s: Optional[float]  # inside torch.distributed collectives, per step; null: none seen
    own_mean_s: float              # wait + step - collective: the rank's own time per step
    step_cpu_mean_s: float
    samples_per_s: Optional[float]
    starvation: Optional[float]


@dataclasses.dataclass
class Ranks(Record):
    world_size: int
    backend: str
    slowest: int                   # the rank with the most own time per step
    collectives_timed: bool        # collectives were seen (else own time is wait + step CPU time)
    list: list[RankRow]


# -- the report --------------------------------------------------------------------------------
@dataclasses.dataclass
class Evidence(Record):
    """The report minus its findings (Doctor.evidence(), pipeline.scan())."""
    schema: str
    schema_version: int
    mode: str                      # "loop", "pipeline" or "trace"
    created_unix: float
    machine: Machine
    loader: LoaderInfo
    loop: Optional[Loop] = ABSENT
    torch: Optional[TorchEvidence] = ABSENT
    feedline: Optional[FeedlineEvidence] = ABSENT
    scan: list[ScanRun] = ABSENT
    pipeline: PipelineInfo = ABSENT
    stages: list[Stage] = ABSENT
    capacity: Capacity = ABSENT
    timeline: Timeline = ABSENT
    probes: Optional[ProbeStatus] = ABSENT
    step: StepAnatomy = ABSENT     # Doctor(profile_steps=N), or trace mode
    trace: TraceInfo = ABSENT      # trace mode
    what_if: WhatIf = ABSENT       # a torch DataLoader, Doctor(what_if=True)
    ranks: Ranks = ABSENT          # under torch.distributed, on every rank (rank 0 writes it)
    tokens: TokenEvidence = ABSENT  # batches of token ids (doctor/tokens.py)
    findings: list[dict[str, JSON]] = ABSENT  # the rules' output (rules/__init__.py)
