"""bench/e2e/doctor_accuracy_bench.py runs and prints a row per rule (its
figures are the benchmark's business, never a test's: a busy machine moves
them). A short real run of two step-side cases."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "e2e" / "doctor_accuracy_bench.py"


def test_bench_prints_a_row_per_rule(feedline_bin):
    rules = ["host_sync", "python_bound", "pageable_copies"]
    out = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--no-input", "--only", ",".join(rules)],
                         capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, FEEDLINE_BIN=str(feedline_bin)))
    assert out.returncode == 0, out.stdout + out.stderr
    table = out.stdout[out.stdout.index("| rule |"):].splitlines()
    assert [row.split("|")[1].strip() for row in table[2:]] == rules
    for row in table[2:4]:  # run on any machine; pageable_copies needs CUDA
        assert row.split("|")[2].strip() in ("1/1", "0/1")
