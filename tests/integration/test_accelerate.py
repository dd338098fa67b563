"""Hugging Face Accelerate with a feedline loader (docs/integrations.md,
examples/accelerate/train.py), the real Accelerate on 2 gloo ranks launched
as external processes: prepare() hands the loader back untouched (sharded
once, by feedline), register_for_checkpointing puts its state in
save_state, and a run saved mid-epoch and resumed with load_state in new
processes trains on exactly the rows of an uninterrupted run, step for step
and rank for rank; the loss falls; the doctor's report names the loop."""
import json

import pytest

pytest.importorskip("accelerate", reason="accelerate is in the torch 2 venv (make test-torch2)")
pytest.importorskip("pyarrow", reason="FEEDLINE_PYARROW_DIR (make test sets it) has no pyarrow")
from trainers import ROOT, check_resumed, parquet_set, ranks  # noqa: E402

SCRIPT = ROOT / "examples" / "accelerate" / "train.py"


@pytest.fixture(scope="module")
def data(tmp_path_factory, gen_dataset):
    return parquet_set(tmp_path_factory.mktemp("accelerate"), gen_dataset)


def test_save_state_mid_epoch_resumes_on_exactly_the_rows_of_an_uninterrupted_run(data, tmp_path):
    # 64 rows, 2 ranks x 8: 4 steps an epoch; 200 steps; the state saved at step 70 is mid-epoch.
    ranks(SCRIPT, "--data", data, "--steps", 200, "--record", tmp_path / "whole.jsonl",
          "--doctor", tmp_path / "doctor.json")
    ranks(SCRIPT, "--data", data, "--steps", 70, "--save-at", 70, "--ckpt", tmp_path / "ckpt",
          "--record", tmp_path / "part.jsonl")
    assert (tmp_path / "ckpt" / "custom_checkpoint_0.pkl").exists(), "save_state wrote no loader state"
    ranks(SCRIPT, "--data", data, "--steps", 200, "--resume", tmp_path / "ckpt", "--record", tmp_path / "rest.jsonl")
    check_resumed(tmp_path / "whole.jsonl", tmp_path / "part.jsonl", tmp_path / "rest.jsonl", 200, 70)
    report = json.loads((tmp_path / "doctor.json").read_text())
    assert report["loader"]["kind"] == "feedline" and report["loop"]["steps"] == 200
    assert report["ranks"]["world_size"] == 2 and [r["rank"] for r in report["ranks"]["list"]] == [0, 1]
