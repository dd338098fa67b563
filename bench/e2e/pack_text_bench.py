"""Text corpora to tokens (issue 36 "Benchmarks"): a FineWeb-style Parquet
corpus (text, id, url, language_score columns; 10^5 documents of a Zipf
vocabulary in 8 files of 1,000-row groups) tokenised with the same byte-level
BPE tokenizer (Hugging Face tokenizers, 16k vocabulary trained here on the
corpus's first documents) by

- feedline/pack-text: feedline.pack_text(the Parquet folder, out, tokenizer,
  num_threads=cores): encode_batch on threads, token shards written with
  document boundaries;
- datasets/map: datasets.load_dataset("parquet", data_files=files)
  .map(encode_batch, batched=True, num_proc=cores, remove_columns=...), the
  Hugging Face way (its Arrow cache written, as map does),

side by side in one run, interleaved rounds, medians. Each configuration is
its own process printing one JSON line (tokens, seconds, tokens/s; the time
covers reading the Parquet through writing the tokens). Runs under the torch
2 venv (tokenizers, datasets, pyarrow; feedline from build-torch2/python).

    <torch2 venv>/bin/python bench/e2e/pack_text_bench.py [--docs 100000] [--repeats 3] [--quick]
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYTHONPATH = os.environ.get("FEEDLINE_PYTHONPATH", str(ROOT / "build-torch2" / "python"))
sys.path.insert(0, str(ROOT))
from bench.common import results as bench_results  # noqa: E402
from bench.common import workers  # noqa: E402

FILES = 8
CONFIGS = ("feedline/pack-text", "datasets/map")


def make_corpus(docs: int) -> pathlib.Path:
    """bench/data/fineweb-like-DOCS: data/*.parquet and tokenizer.json, made once."""
    out = ROOT / "bench" / "data" / f"fineweb-like-{docs}"
    if (out / "tokenizer.json").exists():
        return out
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import tokenizers
    rng = np.random.default_rng(36)
    letters = np.array(list("etaoinshrdlcumwfgypbvkjxqz"))
    vocab = ["".join(rng.choice(letters, size=int(rng.integers(2, 10)))) for _ in range(30000)]
    ranks = np.arange(1, len(vocab) + 1, dtype=np.float64)
    p = (1 / ranks ** 1.1) / (1 / ranks ** 1.1).sum()
    tmp = out.with_suffix(".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "data").mkdir(parents=True)
    per = (docs + FILES - 1) // FILES
    sample = []
    for f in range(FILES):
        n = min(per, docs - f * per)
        lengths = rng.integers(20, 300, size=n)
        words = rng.choice(len(vocab), size=int(lengths.sum()), p=p)
        texts, at = [], 0
        for k in range(n):
            w = [vocab[i] for i in words[at:at + lengths[k]]]
            at += lengths[k]
            texts.append(" ".join(w[:len(w) // 2]).capitalize() + ". " + " ".join(w[len(w) // 2:]) + ".")
        if f == 0:
            sample = texts[:5000]
        ids = [f"<urn:uuid:{f:02d}-{k:07d}>" for k in range(n)]
        table = pa.table({"text": texts, "id": ids, "url": [f"https://example.org/{i}" for i in ids],
                          "language_score": rng.uniform(0.65, 1.0, size=n)})
        pq.write_table(table, tmp / "data" / f"{f:03d}_00000.parquet", row_group_size=1000)
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    tok.train_from_iterator(sample, tokenizers.trainers.BpeTrainer(vocab_size=16384,
                                                                     special_tokens=["<|endoftext|>"]))
    tok.save(str(tmp / "tokenizer.json"))
    tmp.rename(out)
    return out


def worker(a):
    corpus = pathlib.Path(a.data)
    files = sorted(str(p) for p in (corpus / "data").glob("*.parquet"))
    tok_path = str(corpus / "tokenizer.json")
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="pack-text-bench-"))
    try:
        t0 = time.perf_counter()
        if a.worker == "feedline/pack-text":
            import feedline
            m = feedline.pack_text(corpus / "data", scratch / "out", tok_path, num_threads=a.cores, progress=False)
            tokens, documents = m["tokens"], m["documents"]
        elif a.worker == "datasets/map":
            import datasets
            import tokenizers
            tok = tokenizers.Tokenizer.from_file(tok_path)
            eos = tok.token_to_id("<|endoftext|>")
            ds = datasets.load_dataset("parquet", data_files=files, split="train", cache_dir=str(scratch / "hf"))

            def encode(batch):
                return {"input_ids": [e.ids + [eos] for e in tok.encode_batch(batch["text"], add_special_tokens=False)]}

            out = ds.map(encode, batched=True, batch_size=1000, num_proc=a.cores, remove_columns=ds.column_names)
            documents = len(out)
            import pyarrow.compute as pc
            tokens = int(pc.sum(pc.list_value_length(out.data.table.column("input_ids"))).as_py())
        else:
            raise SystemExit(f"unknown worker {a.worker}")
        s = time.perf_counter() - t0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    import tokenizers
    print(json.dumps({"tokens": tokens, "documents": documents, "seconds": round(s, 3),
                      "tokens_per_s": round(tokens / s, 1), "tokenizers": tokenizers.__version__}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=100000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="CI smoke: 4,000 documents, one repeat")
    ap.add_argument("--worker")
    ap.add_argument("--data")
    ap.add_argument("--cores", type=int, default=os.cpu_count())
    a = ap.parse_args()
    if a.worker:
        os.environ.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
        return worker(a)
    if a.quick:
        a.docs, a.repeats = 4000, 1
    corpus = make_corpus(a.docs)
    cores = os.cpu_count() or 1
    runs = {}
    for _ in range(a.repeats):  # interleaved, so drift hits all alike
        for name in CONFIGS:
            cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--worker", name, "--data", str(corpus),
                   "--cores", str(cores)]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800,
                               env=dict(os.environ, PYTHONPATH=PYTHONPATH, HF_HOME=str(corpus.parent / "hf-home")))
            runs.setdefault(name, []).append(json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0
                                             else {"error": f"{name} failed ({p.returncode}): {p.stderr[-2000:]}"})
    table = workers.median_table(runs, "tokens_per_s", medians=("seconds",), firsts=("tokens", "documents"))
    f, d = table["feedline/pack-text"].get("tokens_per_s"), table["datasets/map"].get("tokens_per_s")
    ratios = {"pack-text / datasets.map, tokens/s (same tokenizer, batched)": f / d if f and d else None}
    meta = {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {cores} cores",
            "corpus": f"{a.docs} FineWeb-style documents in {FILES} Parquet files", "repeats": a.repeats,
            "tokenizers": next((r.get("tokenizers") for rs in runs.values() for r in rs if "tokenizers" in r), None),
            "load_avg_1min": os.getloadavg()[0]}
    lines = ["# Parquet text to tokens: feedline pack-text vs datasets.map (issue 36)", "",
             f"{meta['date']}, {meta['machine']}, {meta['corpus']}, a 16k byte-level BPE (tokenizers "
             f"{meta['tokenizers']}) for both, median of {a.repeats} interleaved rounds (spread min-max), "
             f"load average {meta['load_avg_1min']:.1f} at the end. Time from the Parquet files to the tokens "
             f"written (token shards; datasets' Arrow cache).", "",
             "| configuration | tokens/s | spread | seconds | tokens |", "|---|---|---|---|---|"]
    for name, r in table.items():
        if r.get("error"):
            lines.append(f"| {name} | failed: {r['error'].splitlines()[-1][:160]} | | | |")
        else:
            lines.append(f"| {name} | {r['tokens_per_s']:.0f} | {r['min']:.0f}-{r['max']:.0f} | {r['seconds']:.2f} | "
                         f"{r['tokens']} |")
    lines += ["", "| ratio | value |", "|---|---|"] + [f"| {k} | {'-' if v is None else f'{v:.2f}x'} |"
                                                       for k, v in ratios.items()]
    text = "\n".join(lines) + "\n"
    print(text)
    bench_results.write("pack_text", {"meta": meta, "results": table, "ratios": ratios}, text, quick=a.quick)
    failed = [n for n, r in table.items() if r.get("error")]
    if a.quick and failed:  # the CI smoke (make test-torch2): a configuration that rots fails it
        sys.exit(f"{', '.join(failed)} failed: " + table[failed[0]]["error"][-2000:])


if __name__ == "__main__":
    main()
