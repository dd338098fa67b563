"""bench/gpu/train_bench.py --dry-run: the GPU run's code on a CPU, tiny and
quick, so that the script cannot rot between the runs on a GPU machine."""
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu" / "train_bench.py"


def test_gpu_bench_dry_run(feedline_bin, tmp_path):
    env = dict(os.environ, FEEDLINE_BIN=feedline_bin)
    env.pop("OUT", None)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    report = json.loads((tmp_path / "gpu-dryrun-quick.json").read_text())
    assert report["config"]["dry_run"] is True
    runs = {(r["model"], r["loader"]): r for r in report["runs"]}
    assert set(runs) == {("resnet18", "torch"), ("resnet18", "feedline")}
    for r in runs.values():
        assert "error" not in r, r
        assert r["images_per_s"] > 0
        assert len(r["images_per_s_windows"]) == 2  # 4 measured steps in windows of 2
        assert 0 <= r["starvation_pct"] <= 100
        assert r["cpu_s"] > 0
        assert (r["peak_pss_bytes"] or r["peak_rss_bytes"]) > 0
        assert r["loss_first"] == r["loss_first"] and r["loss_last"] == r["loss_last"]  # not NaN
    # The DataLoader's workers are part of the measured process tree.
    assert runs[("resnet18", "torch")]["processes_in_tree"] >= 3
    assert "resnet18" in report["ratios"]
    checksum = report["checksum"]
    assert checksum["batches"] == 20 and checksum["mismatches"] == 0, checksum
    md = (tmp_path / "gpu-dryrun-quick.md").read_text()
    assert "DRY RUN" in md and "| resnet18 | feedline |" in md and "0 mismatches" in md
