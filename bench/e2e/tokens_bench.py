"""Token streams for LM training (issue 18): feedline.TokenLoader against
nanoGPT-style `get_batch` and litdata's TokensLoader, on the same corpus.

Set-up (cached under bench/data/): a flat uint16 token file (nanoGPT's
train.bin layout) of --tokens random ids below 50257, written in 16M-token
chunks so memory stays small; the same tokens converted to litdata's own
format with `litdata.optimize` (timed, the time kept beside the output);
litdata 0.2 in $FEEDLINE_CACHE/bench/venv-litdata, a venv of this interpreter with
--system-site-packages from bench/e2e/requirements-litdata.txt (litdata
needs torch >= 2.4, so that venv holds torch 2.13: the CPU build where
the machine's wheel folder has it; numpy is Debian's). A failed install is
kept with pip's error and printed as the peer's row; `--retry-failed` tries
again.

Each figure is measured in a fresh process (page cache warm, imports
excluded), interleaved over --repeats rounds, medians. Every loader gives
windows of seq_len = 2048 tokens, --batch-size per batch, shuffled, and the
loop takes --batches batches after --warmup:

- feedline.TokenLoader (concat packing), num_threads 1 and 2: input_ids,
  labels, position_ids, document_ids (int64) and cu_seqlens per batch; and
  at 1 thread with fields=("input_ids", "labels"), the two fields the peers
  make (72 KB vs 32 KB written per sequence);
- nanoGPT-style get_batch: random offsets into an np.memmap opened per
  batch, each window widened with astype(int64), stacked (x and y);
- litdata StreamingDataset + TokensLoader(block_size 2049) through its
  StreamingDataLoader, num_workers 0 and 2; the loop widens x and y to int64
  as a training step must (litdata hands over uint16).

Tokens/s per core is tokens / CPU-seconds of the process tree in the timed
window (2048 tokens per sequence for every loader); loader overhead per
sequence is CPU-seconds / sequences (the issue's target: < 5 µs). Time to
first batch runs from before the loader is made (after imports) to the
first batch in hand. Peak RSS is VmHWM of each process of the tree, summed
(file pages of a mapped corpus that were touched count), beside the same
interpreter with only torch and numpy imported; anonymous and file RSS at
the end of the loop tell the loader's own memory from page-cache pages.

    /usr/bin/python3 bench/e2e/tokens_bench.py [--tokens 1000000000] [--repeats 3] [--quick]

Results in bench/results/tokens.{json,md}.
"""
import argparse
import datetime
import hashlib
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.common import results as bench_results  # noqa: E402

HERE = ROOT / "bench" / "e2e"
PYTHON = sys.executable
# Outside the clone (scripts/envcache.py's cache folder), so that a fresh
# clone reuses it; keyed by the requirements' hash through the status file.
CACHE = pathlib.Path(os.environ.get("FEEDLINE_CACHE") or pathlib.Path.home() / ".cache" / "feedline") / "bench"
VENV = CACHE / "venv-litdata"
VENV_PYTHON = VENV / "bin" / "python"
REQUIREMENTS = HERE / "requirements-litdata.txt"
STATUS = CACHE / "status-litdata.json"  # --litdata-status
SEQ_LEN = 2048
VOCAB = 50257  # GPT-2's, as nanoGPT's OpenWebText train.bin

# The measuring side of every child: CPU of the process tree (the loader's
# threads or worker processes included) and the sum of each process's peak
# RSS, both from /proc; the loop's figures printed as JSON on the last line.
COMMON = """
import json, os, sys, time
sys.path.insert(0, os.environ["BENCH_ROOT"])
from bench.common import procfs

def memory(keys=("VmHWM", "RssAnon", "RssFile")):
    # Each key of /proc/PID/status summed over the tree, in bytes.
    total = dict.fromkeys(keys, 0)
    for pid in procfs.tree_pids(os.getpid()):
        try:
            sizes = procfs.status_sizes(pid)
        except OSError:
            continue
        for k in keys:
            total[k] += sizes.get(k, 0)
    return total

class TreeCpu:
    # CPU seconds of this process (getrusage: every thread, to the
    # microsecond) plus its descendants' (worker processes; /proc, in ticks).
    def __init__(self):
        self.seen = {}

    def sample(self):
        import resource
        me = os.getpid()
        for pid in procfs.tree_pids(me)[1:]:
            s = procfs.process_cpu_seconds(pid)
            if s is not None:
                self.seen[pid] = s
        u = resource.getrusage(resource.RUSAGE_SELF)
        return u.ru_utime + u.ru_stime + sum(self.seen.values())

def measure(make, batches, warmup, seqs_per_batch):
    clock = TreeCpu()
    t = time.perf_counter()
    it = make()
    next(it)
    first = time.perf_counter() - t
    for _ in range(warmup):
        next(it)

    def window():
        cpu0, t0 = clock.sample(), time.perf_counter()
        for _ in range(batches):
            next(it)
        return time.perf_counter() - t0, clock.sample() - cpu0

    # The first window meets a cold mapping (every window a new large folio
    # to fault in, its page-cache lines not in any cache); a training run
    # spends all but its first minutes in the steady state, measured after
    # STEADY_AFTER more batches.
    cold_wall, cold_cpu = window()
    for _ in range(int(os.environ.get("STEADY_AFTER", "0"))):
        next(it)
    wall, cpu = window()
    mem = memory()  # before the loader (and any worker) goes away
    print(json.dumps({"first_batch_s": first, "wall_s": wall, "cpu_s": cpu, "cold_wall_s": cold_wall,
                      "cold_cpu_s": cold_cpu, "peak_rss": mem["VmHWM"], "rss_anon": mem["RssAnon"],
                      "rss_file": mem["RssFile"], "sequences": batches * seqs_per_batch}))
"""

BASELINE = COMMON + """
import numpy, torch
mem = memory()
print(json.dumps({"peak_rss": mem["VmHWM"], "rss_anon": mem["RssAnon"]}))
"""

FEEDLINE = COMMON + """
import feedline
path, batch, threads, batches, warmup, seed, all_fields = sys.argv[1], *map(int, sys.argv[2:8])
# A documents corpus (eos-terminated, eos 0) for either packing: argv[8].
packing = sys.argv[8] if len(sys.argv) > 8 else None
docs = {} if packing is None else {"packing": packing, "eos_token": 0}
if packing == "best_fit":
    docs["pad_token"] = 0

def make():
    # all_fields: the four fields and cu_seqlens; else input_ids and labels
    # only, what nanoGPT's get_batch and litdata's loop make.
    fields = None if all_fields else ("input_ids", "labels")
    loader = feedline.TokenLoader(path, seq_len=%d, batch_size=batch, shuffle=True, seed=seed,
                                  drop_last=True, num_threads=threads, fields=fields, **docs)
    epoch = 0
    while True:
        loader.set_epoch(epoch)
        yield from loader
        epoch += 1

measure(make, batches, warmup, batch)
""" % SEQ_LEN

# nanoGPT's get_batch, described in our words: fresh memmap each call
# (nanoGPT re-opens it per batch so its pages do not pile up), uniform
# random starts, each window copied and widened to int64, stacked.
NANOGPT = COMMON + """
import numpy as np, torch
path, batch, batches, warmup, seed = sys.argv[1], *map(int, sys.argv[2:])
SEQ = %d

def make():
    gen = torch.Generator().manual_seed(seed)
    while True:
        tokens = np.memmap(path, dtype=np.uint16, mode="r")
        starts = torch.randint(len(tokens) - SEQ, (batch,), generator=gen).tolist()
        x = torch.stack([torch.from_numpy(tokens[s:s + SEQ].astype(np.int64)) for s in starts])
        y = torch.stack([torch.from_numpy(tokens[s + 1:s + 1 + SEQ].astype(np.int64)) for s in starts])
        yield x, y

measure(make, batches, warmup, batch)
""" % SEQ_LEN

LITDATA = COMMON + """
from litdata import StreamingDataLoader, StreamingDataset, TokensLoader
path, batch, workers, batches, warmup, seed = sys.argv[1], *map(int, sys.argv[2:])

def make():
    ds = StreamingDataset(input_dir=path, item_loader=TokensLoader(block_size=%d), shuffle=True, seed=seed,
                          drop_last=True)
    dl = StreamingDataLoader(ds, batch_size=batch, num_workers=workers)
    epoch = 0
    while True:
        dl.current_epoch = epoch + 1
        for b in dl:
            yield b[:, :-1].long(), b[:, 1:].long()  # uint16 -> int64, as a training step needs
        epoch += 1

measure(make, batches, warmup, batch)
""" % (SEQ_LEN + 1)

# Best-fit padding on a log-normal document-length distribution: a flat
# file of documents (eos-terminated), the plan's padding share beside
# padding each document (and each seq_len piece of a longer one) to seq_len.
PADDING = """
import json, sys
import numpy as np
import feedline
path, docs, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
SEQ, EOS = %d, 0
rng = np.random.default_rng(seed)
lengths = np.maximum(1, rng.lognormal(np.log(500), 1.0, docs).astype(np.int64))
parts = []
for n in lengths:
    parts.append(rng.integers(1, 50257, int(n - 1), dtype=np.uint16))
    parts.append(np.array([EOS], np.uint16))
np.concatenate(parts).tofile(path)
import time
t = time.perf_counter()
loader = feedline.TokenLoader(path, seq_len=SEQ, batch_size=8, eos_token=EOS, packing="best_fit", pad_token=EOS,
                              num_threads=1)
plan_s = time.perf_counter() - t
full, rest = lengths // SEQ, lengths %% SEQ
pieces = int(full.sum() + (rest > 0).sum())
pad_each = 1 - int(lengths.sum()) / (pieces * SEQ)
print(json.dumps({"documents": docs, "tokens": int(lengths.sum()), "best_fit": loader.padding_share,
                  "pad_each_document": pad_each, "sequences": loader.num_windows, "plan_s": plan_s}))
""" % SEQ_LEN

# pack-text throughput: MB of text per CPU-second, at 1 and 2 threads, on
# generated JSONL (words of a fixed vocabulary, log-normal document
# lengths) with a BPE tokenizer trained here on part of it (nothing is
# downloaded). Runs where `tokenizers` is importable (the litdata venv).
PACK_TEXT = """
import json, os, resource, shutil, sys, time
import numpy as np
import feedline
from feedline.pack_text import pack_text
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
work, megabytes = sys.argv[1], float(sys.argv[2])
os.makedirs(work, exist_ok=True)
src, tok_path = os.path.join(work, "text.jsonl"), os.path.join(work, "tokenizer.json")
if not os.path.exists(src):
    rng = np.random.default_rng(0)
    words = ["".join(chr(97 + c) for c in rng.integers(0, 26, int(n))) for n in rng.integers(2, 10, 5000)]
    with open(src + ".tmp", "w") as f:
        written = 0
        while written < megabytes * 1e6:
            n = max(1, int(rng.lognormal(np.log(300), 1.0)))
            line = json.dumps({"text": " ".join(words[i] for i in rng.integers(0, len(words), n))}) + "\\n"
            f.write(line)
            written += len(line)
    os.replace(src + ".tmp", src)
if not os.path.exists(tok_path):
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    with open(src) as f:
        sample = [json.loads(line)["text"] for _, line in zip(range(2000), f)]
    tok.train_from_iterator(sample, trainers.BpeTrainer(vocab_size=4096, special_tokens=["[UNK]", "<|endoftext|>"]))
    tok.save(tok_path)
text_bytes = os.path.getsize(src)
out = {}
for threads in (1, 2):
    dst = os.path.join(work, f"shards-{threads}")
    shutil.rmtree(dst, ignore_errors=True)
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    m = pack_text(src, dst, tok_path, num_threads=threads, progress=False)
    r1, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - t0
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    out[str(threads)] = {"mb_per_cpu_s": text_bytes / 1e6 / cpu, "mb_per_s": text_bytes / 1e6 / wall,
                         "tokens": m["num_tokens"] if "num_tokens" in m else m.get("tokens")}
print(json.dumps({"text_mb": text_bytes / 1e6, "threads": out}))
"""

# litdata's conversion runs as a script file (bench/e2e/tokens_litdata_convert.py):
# its worker processes are spawned and import the piece function from it.
CONVERT = HERE / "tokens_litdata_convert.py"


def write_tokens(path, tokens, seed=0, chunk=1 << 24):
    """`tokens` uniform ids below VOCAB as uint16, chunk by chunk, under a
    .partial name renamed when complete."""
    if path.exists():
        return
    tmp = path.with_name(path.name + ".partial")
    rng = np.random.default_rng(seed)
    with open(tmp, "wb") as f:
        for start in range(0, tokens, chunk):
            rng.integers(0, VOCAB, min(chunk, tokens - start), dtype=np.uint16).tofile(f)
    os.replace(tmp, path)


def requirements_hash():
    return hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()


def pip_error(text):
    """What pip said went wrong: its error lines with a little context
    (bench/peers/envs.py's rule), the tail when none says error."""
    lines = [l for l in text.splitlines() if l.strip() and not l.startswith("WARNING: Location")]
    keep = [i for i, l in enumerate(lines) if "error" in l.lower()]
    if not keep:
        return "\n".join(lines[-15:])
    return "\n".join(lines[max(0, keep[0] - 2):keep[0] + 38])


def setup_litdata(retry_failed, allow_install, status_path=STATUS):
    """The litdata venv's status: cached per requirements file in
    status_path, failures kept with pip's error (as bench/peers/envs.py
    keeps them)."""
    want = requirements_hash()
    try:
        st = json.loads(status_path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        st = None
    if st and st.get("requirements") == want and (st["ok"] or not retry_failed):
        return st
    if not allow_install:
        return {"ok": False, "error": f"{VENV} is not set up (a full run of this benchmark makes it)"}
    print(f"[tokens] setting up {VENV} (pip install -r {REQUIREMENTS.relative_to(ROOT)})", flush=True)
    t0 = time.monotonic()
    status_path.parent.mkdir(parents=True, exist_ok=True)
    if not VENV_PYTHON.exists():
        subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", str(VENV)], check=True)
    p = subprocess.run([str(VENV_PYTHON), "-m", "pip", "install", "-r", str(REQUIREMENTS)], capture_output=True,
                       text=True, env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    (status_path.parent / "pip-litdata.log").write_text(p.stdout + p.stderr)
    ok = p.returncode == 0
    error = "" if ok else (f"`pip install -r {REQUIREMENTS.relative_to(ROOT)}` exit {p.returncode}:\n" +
                           pip_error(p.stdout + p.stderr))
    st = {"ok": ok, "requirements": want, "seconds": round(time.monotonic() - t0, 1), "error": error}
    status_path.write_text(json.dumps(st, indent=1))
    return st


def run_child(python, code, args, python_path=None, steady_after=0):
    """A child's JSON line (code run with -c; None: args start with a
    script), or {"error": ...} with the tail of its stderr:
    a peer that fails is reported, never dropped."""
    env = dict(os.environ, BENCH_ROOT=str(ROOT), STEADY_AFTER=str(steady_after))
    if python_path:
        env["PYTHONPATH"] = str(python_path)
    cmd = [str(python), *(["-c", code] if code is not None else []), *map(str, args)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        tail = [l for l in p.stderr.strip().splitlines() if l.strip()][-3:]
        return {"error": f"exit {p.returncode}: " + " | ".join(tail)}
    return json.loads(p.stdout.strip().splitlines()[-1])


def convert_litdata(flat, out, tokens, reconvert):
    """litdata's optimized copy of the flat file and the conversion's
    figures (measured when it was made; --reconvert measures again)."""
    done = out.with_name(out.name + ".json")
    if done.exists() and out.exists() and not reconvert:
        return json.loads(done.read_text())
    if out.exists():
        subprocess.run(["rm", "-rf", str(out)], check=True)
    pieces = max(4, -(-tokens // (1 << 25)))
    r = run_child(VENV_PYTHON, None, [CONVERT, flat, out, pieces, SEQ_LEN + 1])
    if "error" in r:
        return r
    index = out / "index.json"
    chunks = json.loads(index.read_text()).get("chunks") if index.exists() else None
    if not chunks:  # litdata leaves an empty index when its workers fail
        return {"error": f"{index} lists no chunks after litdata.optimize"}
    if sum(c["dim"] for c in chunks) != tokens:
        return {"error": f"{index} holds {sum(c['dim'] for c in chunks)} tokens, the flat file {tokens}"}
    r.update({"date": datetime.date.today().isoformat(), "tokens": tokens, "pieces": pieces,
              "bytes": sum(f.stat().st_size for f in out.iterdir())})
    r["tokens_per_s"] = tokens / r["seconds"]
    done.write_text(json.dumps(r, indent=1))
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=10**9)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--batches", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--steady-after", type=int, default=3000,
                    help="batches between the first (cold) timed window and the steady one")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--python-path", default=str(ROOT / "build" / "python"))
    ap.add_argument("--retry-failed", action="store_true", help="set up the litdata venv again after a failure")
    ap.add_argument("--reconvert", action="store_true", help="run litdata's conversion again (and time it)")
    ap.add_argument("--data-dir", default=str(ROOT / "bench" / "data"))
    ap.add_argument("--out-dir", default=None, help="where the results go (default bench/results)")
    ap.add_argument("--litdata-status", default=str(STATUS), help="the litdata venv's set-up status file")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:  # the `make test` smoke: small corpus, one round; uses the litdata venv only if made
        a.tokens, a.batches, a.warmup, a.repeats, a.steady_after = 10**7, 30, 3, 1, 10
    data = pathlib.Path(a.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    flat = data / f"tokens-uint16-{a.tokens}.bin"
    t = time.perf_counter()
    write_tokens(flat, a.tokens)
    print(f"[tokens] corpus {flat}: {a.tokens} tokens ({time.perf_counter() - t:.1f} s)",
          flush=True)

    lit = setup_litdata(a.retry_failed, allow_install=not a.quick, status_path=pathlib.Path(a.litdata_status))
    conversion = None
    if lit["ok"]:
        conversion = convert_litdata(flat, data / f"tokens-uint16-{a.tokens}-litdata", a.tokens, a.reconvert)
        if "error" in conversion:
            lit = {"ok": False, "error": "litdata.optimize failed: " + conversion["error"]}
    lit_dir = data / f"tokens-uint16-{a.tokens}-litdata"

    # The log-normal documents corpus: the padding figure, and the two
    # packings timed on it.
    padding = run_child(PYTHON, PADDING, [data / "tokens-lognormal-docs.bin", 20000 if a.quick else 200000, 1],
                        a.python_path)
    docs_file = data / "tokens-lognormal-docs.bin"
    B, n, w = a.batch_size, a.batches, a.warmup
    configs = {
        "feedline 1 thread": (PYTHON, FEEDLINE, [flat, B, 1, n, w], a.python_path),
        "feedline 1 thread, log-normal documents, concat": (PYTHON, FEEDLINE, [docs_file, B, 1, n, w],
                                                            a.python_path),
        "feedline 1 thread, log-normal documents, best_fit": (PYTHON, FEEDLINE, [docs_file, B, 1, n, w],
                                                              a.python_path),
        "feedline 2 threads": (PYTHON, FEEDLINE, [flat, B, 2, n, w], a.python_path),
        "feedline 1 thread, input_ids + labels only": (PYTHON, FEEDLINE, [flat, B, 1, n, w], a.python_path),
        "nanoGPT get_batch": (PYTHON, NANOGPT, [flat, B, n, w], None),
        "litdata 0 workers": (VENV_PYTHON, LITDATA, [lit_dir, B, 0, n, w], None),
        "litdata 2 workers": (VENV_PYTHON, LITDATA, [lit_dir, B, 2, n, w], None),
    }
    runs = {name: [] for name in configs}
    for r in range(a.repeats):  # interleaved: drift in the machine's load hits every column alike
        for name, (py, code, args, pp) in configs.items():
            if name.startswith("litdata") and not lit["ok"]:
                continue
            extra = [] if code is not FEEDLINE else [0 if "labels only" in name else 1]
            if "documents" in name:
                extra.append(name.rsplit(", ", 1)[1])
                if "error" in padding:  # no documents corpus
                    runs[name].append({"error": "the documents corpus: " + padding["error"]})
                    continue
            runs[name].append(run_child(py, code, [*args, r + 1, *extra], pp, a.steady_after))
    baseline = {"debian python3 + torch 1.13": run_child(PYTHON, BASELINE, [])}
    if lit["ok"]:
        baseline["litdata venv + torch 2.13"] = run_child(VENV_PYTHON, BASELINE, [])

    figures = {}
    for name, rs in runs.items():
        errors = [x["error"] for x in rs if "error" in x]
        if name.startswith("litdata") and not lit["ok"]:
            figures[name] = {"unavailable": lit["error"]}
            continue
        if not errors and any(x["cpu_s"] <= 0 for x in rs):
            errors = ["no CPU time measured in the timed window (too few --batches)"]
        if errors:
            figures[name] = {"unavailable": errors[0]}
            continue

        def med(f, rs=rs):
            return statistics.median(f(x) for x in rs)
        tps = [x["sequences"] * SEQ_LEN / x["cpu_s"] for x in rs]
        figures[name] = {
            "tokens_per_s": med(lambda x: x["sequences"] * SEQ_LEN / x["wall_s"]),
            "tokens_per_cpu_s": statistics.median(tps), "min": min(tps), "max": max(tps),
            "us_per_sequence": med(lambda x: x["cpu_s"] / x["sequences"] * 1e6),
            "cold_us_per_sequence": med(lambda x: x["cold_cpu_s"] / x["sequences"] * 1e6),
            "first_batch_s": med(lambda x: x["first_batch_s"]),
            "peak_rss_mib": med(lambda x: x["peak_rss"] / 2**20),
            "rss_anon_mib": med(lambda x: x["rss_anon"] / 2**20),
            "rss_file_mib": med(lambda x: x["rss_file"] / 2**20),
        }

    def ratio(a_name, b_name, key="tokens_per_cpu_s"):
        fa, fb = figures[a_name], figures[b_name]
        if key not in fa or key not in fb:
            return None
        return fa[key] / fb[key]

    ratios = {}
    for ours in ("feedline 1 thread", "feedline 2 threads", "feedline 1 thread, input_ids + labels only"):
        for peer in ("nanoGPT get_batch", "litdata 0 workers", "litdata 2 workers"):
            ratios[f"{ours} / {peer}, tokens per CPU-second"] = ratio(ours, peer)
    f1 = figures["feedline 1 thread"]
    if lit["ok"]:
        pack = run_child(VENV_PYTHON, PACK_TEXT, [data / "pack-text", 2 if a.quick else 40], a.python_path)
    else:
        pack = {"error": "needs the litdata venv (tokenizers): " + lit["error"]}
    f_ids = figures["feedline 1 thread, input_ids + labels only"]
    targets = {"feedline overhead per 2048-token sequence < 5 µs per core (1 thread, steady state)":
               f1.get("us_per_sequence", float("inf")) < 5.0,
               "the same with the peers' two fields (input_ids, labels)":
               f_ids.get("us_per_sequence", float("inf")) < 5.0,
               "best-fit padding share < 5% (log-normal documents)": padding.get("best_fit", 1.0) < 0.05}

    cores = os.cpu_count()
    meta = {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {cores} cores",
            "tokens": a.tokens, "seq_len": SEQ_LEN, "batch_size": B, "batches": n, "warmup": w,
            "steady_after": a.steady_after,
            "repeats": a.repeats, "litdata_ok": lit["ok"], "kernel": platform.release()}
    baseline_mib = {k: v.get("peak_rss", 0) / 2**20 for k, v in baseline.items()}
    baseline_anon_mib = {k: v.get("rss_anon", 0) / 2**20 for k, v in baseline.items()}
    lines = ["# Token streams: feedline.TokenLoader vs nanoGPT get_batch vs litdata", "",
             f"{meta['date']}, {meta['machine']}, page-cached, a fresh process per figure (imports excluded), "
             f"median of {a.repeats} interleaved rounds.", "",
             f"Corpus: {a.tokens:.0e} random uint16 tokens ({a.tokens * 2 / 1e9:.2f} GB flat file); the "
             "'log-normal documents' rows read the eos-terminated documents of the padding figure below "
             "(either packing, eos_token 0; best fit pads with it). seq_len "
             f"{SEQ_LEN}, batch {B}, shuffled. Two windows of {n} batches each: the first right after {w} "
             f"(a cold mapping: column 'first {n} batches') and the steady state, {a.steady_after} batches "
             "later (every other column). Per core = per CPU-second of the process tree.", "",
             "| loader | tokens/s per core | spread | tokens/s (wall) | µs per sequence (CPU) | "
             f"µs per sequence, first {n} batches | first batch (s) | peak RSS (MiB) | "
             "at the end: anon / file RSS (MiB) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, f in figures.items():
        if "unavailable" in f:
            lines.append(f"| {name} | unavailable: {f['unavailable'].splitlines()[0][:200]} | | | | | | | |")
            continue
        lines.append(f"| {name} | {f['tokens_per_cpu_s'] / 1e6:.1f} M | {f['min'] / 1e6:.1f}-"
                     f"{f['max'] / 1e6:.1f} M | {f['tokens_per_s'] / 1e6:.1f} M | {f['us_per_sequence']:.1f} | "
                     f"{f['cold_us_per_sequence']:.1f} | "
                     f"{f['first_batch_s']:.3f} | {f['peak_rss_mib']:.0f} | {f['rss_anon_mib']:.0f} / "
                     f"{f['rss_file_mib']:.0f} |")
    lines += ["", "The interpreter with only numpy and torch imported: " + ", ".join(
        f"{k} peak RSS {v:.0f} MiB, anon {baseline_anon_mib[k]:.0f} MiB" for k, v in baseline_mib.items()) +
        ". File RSS is page-cache pages of a "
        "mapped corpus: clean, shared and reclaimable; a mapping kept open (feedline, litdata's chunks) "
        "accumulates the pages it touched, and on kernels that map whole large folios (6.x) a few thousand "
        "random windows touch most of a page-cached file. nanoGPT re-opens its memmap every batch, which "
        "unmaps them."]
    if conversion and "seconds" in conversion:
        lines += ["", f"litdata needs its own format: `litdata.optimize` converted the flat file in "
                  f"{conversion['seconds']:.1f} s ({conversion['tokens_per_s'] / 1e6:.0f} M tokens/s, 2 workers, "
                  f"measured {conversion['date']}; not in the figures above). feedline and nanoGPT read the "
                  "flat file as it is."]
    elif not lit["ok"]:
        lines += ["", "litdata unavailable: " + lit["error"]]
    if "error" in padding:
        lines += ["", f"Best-fit padding: unavailable: {padding['error']}"]
    else:
        lines += ["", f"Padding share, {padding['documents']} documents of log-normal length (median 500, "
                  f"sigma 1.0; {padding['tokens'] / 1e6:.1f} M tokens), seq_len {SEQ_LEN}: best fit "
                  f"{padding['best_fit'] * 100:.2f}% ({padding['sequences']} sequences, plan made in "
                  f"{padding['plan_s']:.2f} s with the open), each document padded to seq_len "
                  f"{padding['pad_each_document'] * 100:.1f}%."]
    if "error" in pack:
        lines += ["", f"pack-text: unavailable: {pack['error']}"]
    else:
        lines += ["", f"pack-text ({pack['text_mb']:.1f} MB of JSONL, a 4096-token BPE trained on it, Hugging "
                  "Face tokenizers): " + ", ".join(
                      f"{t} thread{'s' if t != '1' else ''} {v['mb_per_cpu_s']:.1f} MB/s per core "
                      f"({v['mb_per_s']:.1f} MB/s wall)" for t, v in pack["threads"].items()) + "."]
    lines += ["", "| ratio | value |", "|---|---|"] + [
        f"| {k} | {'n/a' if v is None else f'{v:.2f}x'} |" for k, v in ratios.items()]
    lines += ["", "| target (issue 18) | met |", "|---|---|"] + [
        f"| {k} | {'yes' if v else 'no'} |" for k, v in targets.items()]
    text = "\n".join(lines) + "\n"
    print(text)
    bench_results.write("tokens", {"meta": meta, "runs": runs, "figures": figures, "ratios": ratios,
                                   "targets": targets, "padding": padding, "pack_text": pack,
                                   "baseline": baseline, "baseline_peak_rss_mib": baseline_mib,
                                   "baseline_rss_anon_mib": baseline_anon_mib,
                                   "litdata": lit, "litdata_conversion": conversion,
                                   "python_path": a.python_path}, text, out_dir=a.out_dir, quick=a.quick)


if __name__ == "__main__":
    main()
