"""`make demo`'s job (python/feedline/demo.py) on a tiny dataset, so that it
cannot rot: both runs happen, the doctor's verdicts and the side-by-side
table are printed, the reports are written, and the simulated accelerator
says it is simulated."""
import json
import subprocess

import torch

from feedline import demo


def test_demo_runs_both_loaders_and_writes_reports(tmp_path, gen_dataset, feedline_bin, capsys):
    data = gen_dataset(tmp_path / "images", 48, 3)
    shards = tmp_path / "shards"
    subprocess.run([feedline_bin, "pack", str(data), str(shards)], check=True, capture_output=True)
    out = tmp_path / "reports"
    assert demo.main(["--data", str(data), "--shards", str(shards), "--out", str(out), "--batch-size", "8",
                      "--epochs", "1", "--rate", "4000"]) == 0
    text = capsys.readouterr().out
    if not torch.cuda.is_available():
        assert "SIMULATED accelerator" in text and "(accelerator simulated)" in text
    assert "[1/2] torch DataLoader" in text and "[2/2] feedline.Loader" in text
    assert text.count("bottleneck:") == 2 and text.count("top recommendation:") == 2
    assert "feedline / torch:" in text
    for name in ("torch", "feedline"):
        assert (out / f"{name}.html").read_text().startswith("<!DOCTYPE html>")
        report = json.loads((out / f"{name}.json").read_text())
        assert report["loader"]["kind"] == name and report["loop"]["steps"] == 6
        assert json.loads((out / f"{name}.trace.json").read_text())["traceEvents"]
