"""One table from every benchmark `make bench` ran (issue 8): feedline vs the
peer, the ratio, the median and the spread of the repeats. Reads
bench/results/{image_pipeline,storage,tuner,engine,peers,tokens,augment,s3,columnar,pack_text,
frameworks}.json (or their -quick variants) and writes bench/results/summary.{md,json}.

    /usr/bin/python3 bench/summary.py [--quick]
"""
import argparse
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.common import results as bench_results  # noqa: E402


def load(name, quick):
    d = bench_results.load(name, quick)
    if d is None:
        path = bench_results.RESULTS / f"{bench_results.suffixed(name, quick)}.json"
        print(f"summary: {path} missing (that benchmark did not run)", file=sys.stderr)
    return d


def row(rows, what, feedline, peer=None, ratio=None, spread="", unit="", note=""):
    rows.append({"benchmark": what, "feedline": feedline, "peer": peer, "ratio": ratio, "spread": spread,
                 "unit": unit, "note": note})


def image_rows(rows, d):
    r = d["results"]

    def rate(name):
        return r[name]["images_per_s"], f"{r[name]['min']:.0f}-{r[name]['max']:.0f}"

    for recipe in ("train", "eval"):
        f, fs = rate(f"{recipe}/feedline")
        t, ts = rate(f"{recipe}/torch")
        row(rows, f"{recipe} pipeline, images/s (C++ runner)", f, t, f / t, f"{fs} vs {ts}", "img/s",
            "peer: torch DataLoader + torchvision, workers = cores")
    if "train/feedline-python" in r:
        f, fs = rate("train/feedline-python")
        t, _ = rate("train/torch")
        row(rows, "train pipeline, images/s (Python loader)", f, t, f / t, fs, "img/s")
        c, _ = rate("train/feedline")
        row(rows, "Python loader / C++ runner, images/s", f, c, f / c, "", "img/s", "target: within 3%")
    f, t = r["train/feedline"]["cpu_s_per_1000"], r["train/torch"]["cpu_s_per_1000"]
    row(rows, "train CPU-seconds per 1000 images", f, t, t / f, "", "CPU-s", "ratio: peer / feedline")
    for name in ("train/feedline", "train/feedline-python"):
        if name in r:
            f, t = r[name]["peak_mib"], r["train/torch"]["peak_mib"]
            row(rows, f"peak memory, process tree ({name.split('/')[1]})", f, t, t / f, "", "MiB PSS",
                "ratio: peer / feedline")
    f, t = r["train/feedline"]["first_batch_s"], r["train/torch"]["first_batch_s"]
    row(rows, "time to first batch", f, t, t / f if f else None, "", "s", "ratio: peer / feedline")
    if "1core/feedline-train" in r:
        f, _ = rate("1core/feedline-train")
        t, _ = rate("1core/full-decode")
        row(rows, "1 core: train pipeline vs plain full decode", f, t, f / t, "", "img/s")
    runs = r.get("train/feedline-python", {}).get("runs", [])
    over = [x["ready_batch_overhead_us"] for x in runs if "ready_batch_overhead_us" in x]
    if over:
        row(rows, "Python hand-over of a ready batch", statistics.median(over), None, None,
            f"{min(over):.0f}-{max(over):.0f}", "us")


def storage_rows(rows, d):
    r = d["rows"]
    for threads in (1, 2):
        base = r.get(f"loose files, {threads} thread{'s' if threads > 1 else ''}")
        for kind in ("feedline shards", "WebDataset tar"):
            x = r.get(f"{kind}, {threads} thread{'s' if threads > 1 else ''}")
            if base and x:
                row(rows, f"read, {kind} vs loose files, {threads} thread(s)", x["samples_per_s"],
                    base["samples_per_s"], x["samples_per_s"] / base["samples_per_s"],
                    f"{x['min']:.0f}-{x['max']:.0f}", "samples/s")
    pack = d.get("pack_mb_per_s") or []
    if pack:
        row(rows, "pack", statistics.median(pack), None, None, f"{min(pack):.0f}-{max(pack):.0f}", "MB/s")


def s3_rows(rows, d):
    r = d["results"]
    pairs = [("feedline/s3-wds-ordered", "s3torchconnector/wds", "s3 wds in order vs s3torchconnector"),
             ("feedline/s3-folder", "s3torchconnector/folder", "s3 folder vs s3torchconnector"),
             ("feedline/s3-folder", "s3fs/folder", "s3 folder vs s3fs"),
             ("feedline/s3-wds-ordered", "feedline/local-wds-ordered", "s3 wds in order vs local disk")]
    for ms in (0, 20):
        for ours, peer, label in pairs:
            x = r.get(f"{ours} @{ms} ms", {})
            y = r.get(f"{peer} @{0 if 'local' in peer else ms} ms", {})
            if x.get("samples_per_s") and y.get("samples_per_s"):
                row(rows, f"{label}, {ms} ms added", x["samples_per_s"], y["samples_per_s"],
                    x["samples_per_s"] / y["samples_per_s"], f"{x['min']:.0f}-{x['max']:.0f}", "img/s",
                    "target >= 0.9" if "local" in peer and ms == 20 else "")


def tuner_rows(rows, d):
    s = d["summary"]
    tuned = [x["images_per_s"] for x in d["drain"]["tuned"]]
    best = [x["images_per_s"] for x in d["drain"][s["best_static"]]]
    row(rows, f"autotuner vs best static ({s['best_static']})", statistics.median(tuned), statistics.median(best),
        s["tuned_over_best_static"], f"{min(tuned):.0f}-{max(tuned):.0f}", "img/s", "target >= 0.95")
    row(rows, "autotuner threads for a consumer-bound loop", s["tuned_threads"], s["threads_needed"], None, "",
        "threads", f"peer: fewest static threads with < 1% starvation above the machine's wake-up floor "
                   f"({100 * s.get('wakeup_floor', 0):.2f}%); tuned starvation {100 * s['tuned_starvation']:.2f}%")


def engine_rows(rows, d):
    by = {}
    for b in d.get("benchmarks", []):
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        if "ns/sample/thread" in b and b["name"].startswith("BM_EngineTrivialOp"):
            key = b["name"].split("/real_time")[0].replace("BM_EngineTrivialOp/", "")
            by.setdefault(key, []).append(b["ns/sample/thread"] * 1e9)
    for key, v in by.items():
        row(rows, f"engine overhead ({key})", statistics.median(v), None, None, "", "ns/sample/thread",
            "target <= 1000")


def peers_rows(rows, d):
    """Per recipe and dataset: the strongest peer that ran (the smallest
    feedline / peer ratio) and how many peers feedline leads; peers that could
    not run are named in bench/results/peers.md with their errors."""
    for case, by_peer in d["results"].items():
        f = by_peer.get("feedline", {}).get("images_per_s")
        ran = {name: r for name, r in by_peer.items()
               if name != "feedline" and isinstance(r, dict) and r.get("images_per_s")}
        if not f or not ran:
            continue
        best = min(ran, key=lambda name: f / ran[name]["images_per_s"])
        t = ran[best]["images_per_s"]
        ahead = sum(1 for r in ran.values() if f > r["images_per_s"])
        check = "output ok" if ran[best].get("sane") else "output check failed"
        row(rows, f"{case} vs the strongest peer ({best}), images/s", f, t, f / t, "", "img/s",
            f"ahead of {ahead}/{len(ran)} peers that ran; {check}; bench/results/peers.md")


def tokens_rows(rows, d):
    f = d["figures"]
    ours = f.get("feedline 1 thread", {})
    if "tokens_per_cpu_s" not in ours:
        return
    for peer in ("nanoGPT get_batch", "litdata 0 workers", "litdata 2 workers"):
        p = f.get(peer, {})
        if "tokens_per_cpu_s" in p:
            row(rows, f"tokens/s per core, TokenLoader (1 thread) vs {peer}", ours["tokens_per_cpu_s"] / 1e6,
                p["tokens_per_cpu_s"] / 1e6, ours["tokens_per_cpu_s"] / p["tokens_per_cpu_s"],
                f"{ours['min'] / 1e6:.0f}-{ours['max'] / 1e6:.0f}", "M tokens/CPU-s", "seq_len 2048")
        else:
            row(rows, f"tokens/s per core, TokenLoader vs {peer}", ours["tokens_per_cpu_s"] / 1e6, None, None, "",
                "M tokens/CPU-s", "peer unavailable: " + p.get("unavailable", "not run").splitlines()[0][:120])
    row(rows, "TokenLoader CPU per 2048-token sequence (1 thread, steady state)", ours["us_per_sequence"], None,
        None, "", "us", "target < 5" + (f"; first batches (cold mapping) {ours['cold_us_per_sequence']:.1f}"
                                         if "cold_us_per_sequence" in ours else ""))
    nano = f.get("nanoGPT get_batch", {})
    if "first_batch_s" in nano:
        row(rows, "TokenLoader time to first batch vs nanoGPT get_batch", ours["first_batch_s"],
            nano["first_batch_s"], None, "", "s", f"{d['meta']['tokens']:.0e} tokens")


def augment_rows(rows, d):
    r = d["results"]
    for recipe in ("resnet50-new", "timm-like"):
        ours, peer = r.get(f"feedline/{recipe}") or {}, r.get(f"torch/{recipe}") or {}
        a, b = ours.get("samples_per_s"), peer.get("samples_per_s")
        row(rows, f"augmentation recipe {recipe}, feedline vs DataLoader + torchvision v2", a, b,
            a / b if a and b else None, f"{ours['min']:.0f}-{ours['max']:.0f}" if a else "", "images/s",
            "target >= 5x")


def columnar_rows(rows, d):
    r = d["results"]
    ours = r.get("feedline/parquet") or {}
    for peer, label, note in (("datasets/parquet", "Parquet images, feedline vs datasets + DataLoader", "target >= 5x"),
                              ("feedline/files", "Parquet images vs the same JPEG files (feedline)", "target >= 0.95")):
        other = r.get(peer) or {}
        a, b = ours.get("samples_per_s"), other.get("samples_per_s")
        row(rows, label, a, b, a / b if a and b else None, f"{ours['min']:.0f}-{ours['max']:.0f}" if a else "",
            "images/s", note)


def pack_text_rows(rows, d):
    r = d["results"]
    ours, peer = r.get("feedline/pack-text") or {}, r.get("datasets/map") or {}
    a, b = ours.get("tokens_per_s"), peer.get("tokens_per_s")
    row(rows, "Parquet text to tokens, pack-text vs datasets.map (same tokenizer)", a, b, a / b if a and b else None,
        f"{ours['min']:.0f}-{ours['max']:.0f}" if a else "", "tokens/s", d["meta"].get("corpus", ""))


def frameworks_rows(rows, d):
    r = d["results"]
    for f, label in (("lightning", "Lightning Trainer fit"), ("accelerate", "Accelerate loop"),
                     ("hf-trainer", "HF Trainer fit")):
        ours, peer = r.get(f"{f}/feedline") or {}, r.get(f"{f}/DataLoader") or {}
        a, b = ours.get("samples_per_s"), peer.get("samples_per_s")
        row(rows, f"{label}, feedline vs its usual DataLoader (small CNN)", a, b, a / b if a and b else None,
            f"{ours['min']:.0f}-{ours['max']:.0f}" if a else "", "samples/s", "issue 37")


def fmt(x):
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.2f}" if abs(x) < 100 else f"{x:.0f}"
    return str(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    rows, meta = [], {}
    for name, fn in (("image_pipeline", image_rows), ("storage", storage_rows), ("tuner", tuner_rows),
                     ("engine", engine_rows), ("peers", peers_rows),
                     ("tokens", tokens_rows), ("augment", augment_rows), ("s3", s3_rows),
                     ("columnar", columnar_rows), ("pack_text", pack_text_rows), ("frameworks", frameworks_rows)):
        d = load(name, a.quick)
        if d is None:
            continue
        fn(rows, d)
        if "meta" in d:
            meta[name] = d["meta"]
        elif "context" in d:
            meta[name] = {"date": d["context"].get("date"), "cpus": d["context"].get("num_cpus")}
    lines = ["# feedline benchmarks: one table", ""]
    for name, m in meta.items():
        lines.append(f"- {name}: " + ", ".join(f"{k} {v}" for k, v in m.items()))
    lines += ["", "| benchmark | feedline | peer | ratio | spread (feedline) | unit | note |",
              "|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"**{r['ratio']:.2f}x**" if r["ratio"] is not None else "-"
        lines.append(f"| {r['benchmark']} | {fmt(r['feedline'])} | {fmt(r['peer'])} | {ratio} | {r['spread']} | "
                     f"{r['unit']} | {r['note']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    bench_results.write("summary", {"meta": meta, "rows": rows}, text, quick=a.quick)


if __name__ == "__main__":
    main()
