"""The Hugging Face Trainer (transformers 5.x) on a feedline loader
(docs/integrations.md, examples/hf_trainer/train.py), the real Trainer on 2
gloo ranks launched as external processes: FeedlineTrainer's checkpoints
carry the loader's position; train(resume_from_checkpoint=True) from a
mid-epoch checkpoint trains on exactly the rows of an uninterrupted run,
step for step and rank for rank, without re-reading the batches before it;
the ranks' rows are disjoint (sharded once); the loss falls; the doctor's
callback reports the Trainer's loop and the model's forward as the step."""
import json
import shutil

import pytest

pytest.importorskip("transformers", reason="transformers is in the torch 2 venv (make test-torch2)")
pytest.importorskip("pyarrow", reason="FEEDLINE_PYARROW_DIR (make test sets it) has no pyarrow")
from trainers import ROOT, check_resumed, parquet_set, ranks  # noqa: E402

SCRIPT = ROOT / "examples" / "hf_trainer" / "train.py"


@pytest.fixture(scope="module")
def data(tmp_path_factory, gen_dataset):
    return parquet_set(tmp_path_factory.mktemp("hf"), gen_dataset)


def test_a_mid_epoch_checkpoint_resumes_on_exactly_the_rows_of_an_uninterrupted_run(data, tmp_path):
    # 64 rows, 2 ranks x 8: 4 steps an epoch; 200 steps; checkpoint-70 is mid-epoch.
    ranks(SCRIPT, "--data", data, "--out", tmp_path / "whole", "--steps", 200, "--record", tmp_path / "whole.jsonl",
          "--doctor", tmp_path / "doctor.json")
    ranks(SCRIPT, "--data", data, "--out", tmp_path / "part", "--steps", 200, "--save-every", 70,
          "--record", tmp_path / "part.jsonl")
    # The interrupted run: keep checkpoint-70 only, and the rows of the steps before it.
    ckpt = tmp_path / "part" / "checkpoint-70"
    assert (ckpt / "feedline_loader.json").exists(), "the checkpoint holds no loader state"
    for later in (tmp_path / "part").glob("checkpoint-*"):
        if later != ckpt:
            shutil.rmtree(later)
    for rank in (0, 1):
        path = tmp_path / f"part.jsonl.rank{rank}"
        kept = [line for line in path.read_text().splitlines() if json.loads(line)["step"] < 70]
        path.write_text("\n".join(kept) + "\n")
    ranks(SCRIPT, "--data", data, "--out", tmp_path / "part", "--steps", 200, "--resume",
          "--record", tmp_path / "rest.jsonl")
    check_resumed(tmp_path / "whole.jsonl", tmp_path / "part.jsonl", tmp_path / "rest.jsonl", 200, 70)
    report = json.loads((tmp_path / "doctor.json").read_text())
    site = report["loop"]["site"]
    assert site["framework"] == "Transformers" and site["loop"] == "Trainer.train"
    assert site["step"] == "Net.forward" and site["file"].endswith("hf_trainer/train.py"), site
    assert report["loader"]["kind"] == "feedline" and report["loop"]["steps"] == 200
    assert report["loop"]["samples"] == 200 * 8


def test_a_checkpoint_of_another_run_is_refused_not_resumed_at_the_wrong_batch(data, tmp_path):
    """The Trainer's own count of batches trained in the epoch is checked
    against the loader state it finds: a mismatch is an error naming both."""
    ranks(SCRIPT, "--data", data, "--out", tmp_path / "a", "--steps", 6, "--save-every", 6, world=1)
    ckpt = tmp_path / "a" / "checkpoint-6"
    state = json.loads((ckpt / "trainer_state.json").read_text())
    state["global_step"] = 5  # the Trainer now resumes at batch 5 % 8 = 5; the loader is at 6
    (ckpt / "trainer_state.json").write_text(json.dumps(state))
    with pytest.raises(AssertionError, match="loader state is at batch 6 of epoch 0, but the Trainer resumes "
                                             "at batch 5"):
        ranks(SCRIPT, "--data", data, "--out", tmp_path / "a", "--steps", 12, "--resume", world=1)
