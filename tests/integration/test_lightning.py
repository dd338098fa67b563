"""PyTorch Lightning with a feedline loader (docs/integrations.md,
examples/lightning/train.py), the real framework on 2 gloo ranks launched as
Lightning expects external processes (LOCAL_RANK, WORLD_SIZE, MASTER_*):
the DataModule returns a feedline.Loader; a run checkpointed mid-epoch by
Lightning's ModelCheckpoint and resumed from it in new processes trains on
exactly the rows of an uninterrupted run, step for step and rank for rank;
the ranks' rows are disjoint (sharded once, by feedline); the loss falls."""
import json

import pytest

pytest.importorskip("lightning", reason="lightning is in the torch 2 venv (make test-torch2)")
pytest.importorskip("pyarrow", reason="FEEDLINE_PYARROW_DIR (make test sets it) has no pyarrow")
from trainers import ROOT, parquet_set, ranks, steps  # noqa: E402

SCRIPT = ROOT / "examples" / "lightning" / "train.py"


@pytest.fixture(scope="module")
def data(tmp_path_factory, gen_dataset):
    return parquet_set(tmp_path_factory.mktemp("lightning"), gen_dataset)


def _ranks(script, *args):
    """`script` on 2 gloo ranks, launched as Lightning expects external processes."""
    ranks(script, "--devices", 2, *args, rank_env=False)


def _fit(data, out, record, max_steps, ckpt_every=0, resume=None, doctor=None):
    _ranks(SCRIPT, "--data", data, "--max-steps", max_steps, "--record", record, "--out", out,
           "--ckpt-every", ckpt_every, *(["--resume", resume] if resume else []),
           *(["--doctor", doctor] if doctor else []))


_steps = steps


def test_a_mid_epoch_checkpoint_resumes_on_exactly_the_rows_of_an_uninterrupted_run(data, tmp_path):
    # 64 rows, 2 ranks x 8: 4 steps an epoch; 30 steps; the checkpoint at step 10 is mid-epoch.
    _fit(data, tmp_path / "whole", tmp_path / "whole.jsonl", 30, doctor=tmp_path / "doctor.json")
    _fit(data, tmp_path / "part", tmp_path / "part.jsonl", 10, ckpt_every=10)
    ckpts = sorted((tmp_path / "part").glob("*.ckpt"))
    assert ckpts, "Lightning wrote no checkpoint"
    _fit(data, tmp_path / "rest", tmp_path / "rest.jsonl", 30, resume=ckpts[-1])
    for rank in (0, 1):
        whole, part, rest = (_steps(tmp_path / f"{n}.jsonl", rank) for n in ("whole", "part", "rest"))
        assert sorted(whole) == list(range(30))
        assert sorted(part) == list(range(10)) and sorted(rest) == list(range(10, 30))
        for s in range(30):
            assert (part if s < 10 else rest)[s]["ids"] == whole[s]["ids"], (rank, s)
    # Sharded once: at every step the two ranks' rows are disjoint; each epoch covers all 64 rows.
    w0, w1 = _steps(tmp_path / "whole.jsonl", 0), _steps(tmp_path / "whole.jsonl", 1)
    for s in range(30):
        assert not set(w0[s]["ids"]) & set(w1[s]["ids"]), s
    for e in range(7):
        seen = [i for s in range(4 * e, 4 * e + 4) for i in w0[s]["ids"] + w1[s]["ids"]]
        assert sorted(seen) == list(range(64)), e
    losses = [w0[s]["loss"] for s in range(30)]
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5, losses
    # The doctor's callback: the Trainer's loop, the LightningModule's training_step as the step.
    report = json.loads((tmp_path / "doctor.json").read_text())
    site = report["loop"]["site"]
    assert site["framework"] == "Lightning" and site["loop"] == "Trainer.fit", site
    assert site["step"] == "Net.training_step" and site["file"].endswith("lightning/train.py"), site
    assert report["loader"]["kind"] == "feedline" and report["loop"]["steps"] == 30
    assert report["loop"]["samples"] == 30 * 8 and report["ranks"]["world_size"] == 2


def test_fabric_saves_and_loads_the_loader_with_the_model(data, tmp_path):
    """Fabric: the user's loop, fabric.save/load with the loader in the state."""
    script = ROOT / "examples" / "lightning" / "fabric_train.py"
    _ranks(script, "--data", data, "--steps", 30, "--record", tmp_path / "whole.jsonl")
    ckpt = tmp_path / "fabric.ckpt"
    _ranks(script, "--data", data, "--steps", 10, "--save-at", 10, "--ckpt", ckpt, "--record", tmp_path / "part.jsonl")
    assert ckpt.exists()
    _ranks(script, "--data", data, "--steps", 30, "--resume", ckpt, "--record", tmp_path / "rest.jsonl")
    for rank in (0, 1):
        whole, part, rest = (_steps(tmp_path / f"{n}.jsonl", rank) for n in ("whole", "part", "rest"))
        assert sorted(part) == list(range(10)) and sorted(rest) == list(range(10, 30))
        for s in range(30):
            assert (part if s < 10 else rest)[s]["ids"] == whole[s]["ids"], (rank, s)
    w0, w1 = _steps(tmp_path / "whole.jsonl", 0), _steps(tmp_path / "whole.jsonl", 1)
    assert all(not set(w0[s]["ids"]) & set(w1[s]["ids"]) for s in range(30))
