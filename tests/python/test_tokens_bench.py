"""bench/e2e/tokens_bench.py: its corpus writer, and a peer that cannot be
set up is printed with its error, never dropped (a tiny real run of the
feedline and nanoGPT-style loaders)."""
import importlib.util
import json
import pathlib
import subprocess
import sys

import numpy as np

import feedline

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "e2e" / "tokens_bench.py"


def _bench():
    spec = importlib.util.spec_from_file_location("tokens_bench", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_token_file_has_every_token_below_the_vocabulary_and_no_partial_left(tmp_path):
    tb = _bench()
    path = tmp_path / "t.bin"
    tb.write_tokens(path, 300_007, chunk=100_000)  # chunks that do not divide the count
    tokens = np.fromfile(path, dtype=np.uint16)
    assert tokens.size == 300_007
    assert int(tokens.max()) < tb.VOCAB and len(np.unique(tokens)) > 1000
    assert not list(tmp_path.glob("*.partial"))
    again = tmp_path / "u.bin"
    tb.write_tokens(again, 300_007, chunk=100_000)  # the same seed: the same corpus on every machine
    assert again.read_bytes() == path.read_bytes()


def test_pip_error_keeps_the_error_lines():
    tb = _bench()
    text = "\n".join(["Collecting litdata", "WARNING: Location 'x' is ignored", "noise"] * 5 +
                     ["ERROR: Could not find a version that satisfies the requirement litdata==9.9"])
    got = tb.pip_error(text)
    assert "litdata==9.9" in got and "WARNING: Location" not in got


def test_a_failed_litdata_set_up_is_printed_with_its_error(tmp_path):
    tb = _bench()
    status = tmp_path / "status-litdata.json"
    status.write_text(json.dumps({"ok": False, "requirements": tb.requirements_hash(), "seconds": 0.0,
                                  "error": "`pip install` exit 1:\nERROR: no matching distribution for litdata"}))
    out = tmp_path / "results"
    p = subprocess.run([sys.executable, str(SCRIPT), "--tokens", "200000", "--batches", "20", "--warmup", "1",
                        "--repeats", "1", "--batch-size", "8", "--data-dir", str(tmp_path / "data"), "--out-dir",
                        str(out), "--litdata-status", str(status), "--python-path",
                        str(pathlib.Path(feedline.__file__).parents[1])],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    d = json.loads((out / "tokens.json").read_text())
    for name in ("litdata 0 workers", "litdata 2 workers"):
        assert "no matching distribution for litdata" in d["figures"][name]["unavailable"]
    assert "unavailable: `pip install` exit 1" in (out / "tokens.md").read_text()
    for name in ("feedline 1 thread", "feedline 2 threads", "nanoGPT get_batch"):
        f = d["figures"][name]
        assert "unavailable" not in f, f
        assert f["tokens_per_cpu_s"] > 0 and f["us_per_sequence"] > 0 and f["peak_rss_mib"] > 0
        assert [r["sequences"] for r in d["runs"][name]] == [20 * 8]
    assert d["litdata_conversion"] is None  # nothing converted for a peer that is not there
