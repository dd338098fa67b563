"""torchtitan's dataloader interface on feedline.TokenLoader
(docs/integrations.md, examples/torchtitan/train.py), on 2 gloo ranks
launched as torchrun would: built through torchtitan's Configurable.build,
checkpointed with torch.distributed.checkpoint as torchtitan's
CheckpointManager saves its Stateful dataloader; a run saved mid-epoch and
resumed in new processes trains on exactly the sequences of an
uninterrupted run, step for step and rank for rank; resumed on 1 rank
instead of 2 (the same global batch), every step holds the sequences the 2
ranks would have had; the loss falls."""
import json

import numpy as np
import pytest

pytest.importorskip("torchtitan", reason="torchtitan is in the torch 2 venv (make test-torch2)")
from trainers import ROOT, ranks, steps  # noqa: E402

SCRIPT = ROOT / "examples" / "torchtitan" / "train.py"
PER_EPOCH = 255 // 8  # 4096 tokens: 255 windows of 16 (+1); 2 ranks x 4 a step, whole global batches


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """4,096 uint16 tokens (nanoGPT's train.bin): every fourth token random,
    each other one 3t + 1 mod 64 of the one before, so a model can learn
    three in four next tokens and every 16-token window is distinct (the
    tests tell sequences apart by their tokens)."""
    rng = np.random.default_rng(0)
    toks, t = [], 0
    for i in range(4096):
        t = int(rng.integers(64)) if i % 4 == 0 else (3 * t + 1) % 64
        toks.append(t)
    windows = {tuple(toks[i * 16:i * 16 + 16]) for i in range(255)}
    assert len(windows) == 255
    path = tmp_path_factory.mktemp("torchtitan") / "train.bin"
    np.asarray(toks, dtype=np.uint16).tofile(path)
    return path


def test_a_dcp_checkpoint_mid_epoch_resumes_on_exactly_the_sequences_of_an_uninterrupted_run(corpus, tmp_path):
    total, cut = 200, 70  # step 70 is batch 8 of epoch 2
    ranks(SCRIPT, "--data", corpus, "--steps", total, "--record", tmp_path / "whole.jsonl",
          "--doctor", tmp_path / "doctor.json", "--doctor-steps", 50)
    ranks(SCRIPT, "--data", corpus, "--steps", cut, "--save-at", cut, "--ckpt", tmp_path / "ckpt",
          "--record", tmp_path / "part.jsonl")
    ranks(SCRIPT, "--data", corpus, "--steps", total, "--resume", tmp_path / "ckpt", "--record",
          tmp_path / "rest.jsonl")
    for k in (0, 1):
        w, p, r = (steps(tmp_path / f"{n}.jsonl", k) for n in ("whole", "part", "rest"))
        assert sorted(p) == list(range(cut)) and sorted(r) == list(range(cut, total))
        for s in range(total):
            assert (p if s < cut else r)[s]["ids"] == w[s]["ids"], (k, s)
    w0, w1 = steps(tmp_path / "whole.jsonl", 0), steps(tmp_path / "whole.jsonl", 1)
    for e in range(total // PER_EPOCH):  # each epoch: every window once over both ranks
        seen = [i for s in range(e * PER_EPOCH, (e + 1) * PER_EPOCH) for i in w0[s]["ids"] + w1[s]["ids"]]
        assert len(seen) == len(set(seen)) == 8 * PER_EPOCH, e
    losses = [w0[s]["loss"] for s in range(total)]
    assert sum(losses[-40:]) / 40 < 0.8 * sum(losses[:40]) / 40, losses
    # The doctor in the loader (torchtitan's loop has no callbacks): its report after 50 steps, both ranks.
    report = json.loads((tmp_path / "doctor.json").read_text())
    assert report["loop"]["site"]["framework"] == "torchtitan", report["loop"]["site"]
    assert report["loader"]["type"] == "TokenLoader" and report["loop"]["steps"] == 50
    assert report["tokens"] and report["ranks"]["world_size"] == 2


def test_resumed_on_another_number_of_ranks_every_step_holds_the_same_global_batch(corpus, tmp_path):
    """2 ranks x 4 saved, 1 rank x 8 resumed (the global batch is what an
    elastic resume keeps): at every later step the one rank trains on the
    sequences the two ranks would have, so none is lost or repeated."""
    cut = 70
    ranks(SCRIPT, "--data", corpus, "--steps", 100, "--record", tmp_path / "whole.jsonl")
    ranks(SCRIPT, "--data", corpus, "--steps", cut, "--save-at", cut, "--ckpt", tmp_path / "ckpt")
    ranks(SCRIPT, "--data", corpus, "--steps", 100, "--batch-size", 8, "--resume", tmp_path / "ckpt", "--record",
          tmp_path / "one.jsonl", world=1)
    w = [steps(tmp_path / "whole.jsonl", k) for k in (0, 1)]
    one = steps(tmp_path / "one.jsonl", 0)
    assert sorted(one) == list(range(cut, 100))
    for s in range(cut, 100):
        assert (one[s]["epoch"], one[s]["batch"]) == (w[0][s]["epoch"], w[0][s]["batch"]), s
        assert sorted(one[s]["ids"]) == sorted(w[0][s]["ids"] + w[1][s]["ids"]), s
