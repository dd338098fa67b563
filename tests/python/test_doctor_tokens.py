"""The doctor on language-model loops (doctor/tokens.py; docs/doctor.md
"Token loops"): a feedline.TokenLoader over a generated flat token file and
a torch DataLoader over an np.memmap dataset of (x, y) sequences. The
report names tokens/s (over the windows of samples/s, so equal to it times
seq_len) and the wait share; every field is documented."""
import json
import time

import numpy as np
import pytest
import torch

import feedline
from feedline.doctor.evidence import TokenEvidence
from feedline.doctor.tokens import count_tokens, token_field

from doctor_plants import undocumented

EOS, SEQ, BATCH = 0, 32, 8
SLEEP_S = 0.002


@pytest.fixture(scope="module")
def flat(tmp_path_factory):
    """A nanoGPT-style train.bin: uint16 documents of varied lengths, each ended by EOS."""
    rng = np.random.default_rng(11)
    docs = [np.append(rng.integers(1, 1000, int(n)), EOS) for n in rng.integers(3, 60, 600)]
    path = tmp_path_factory.mktemp("tokens") / "train.bin"
    np.concatenate(docs).astype(np.uint16).tofile(path)
    return str(path)


class MemmapWindows(torch.utils.data.Dataset):
    """nanoGPT's get_batch as a Dataset: window i of an np.memmap, (x, y) int64."""

    def __init__(self, path, block, sleep_s=0.0):
        self.path, self.block, self.sleep_s = path, block, sleep_s
        self.n = (len(np.memmap(path, dtype=np.uint16, mode="r")) - 1) // block
        self.data = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.data is None:  # opened in the process that reads (a worker)
            self.data = np.memmap(self.path, dtype=np.uint16, mode="r")
        if self.sleep_s:
            time.sleep(self.sleep_s)
        b = i * self.block
        x = torch.from_numpy(self.data[b:b + self.block].astype(np.int64))
        y = torch.from_numpy(self.data[b + 1:b + 1 + self.block].astype(np.int64))
        return x, y


def _watch(loader, epochs=1):
    with feedline.doctor.Doctor(what_if=False) as doctor:
        for _ in range(epochs):
            for _batch in doctor.watch(loader):
                pass
        return doctor.report(file=None)


def _consistent(data, seq_len):
    """tokens/s is samples/s x seq_len, window for window (every row full)."""
    loop, tk = data["loop"], data["tokens"]
    assert tk["seq_len"] == seq_len and tk["tokens_per_sample"] == seq_len
    assert tk["tokens"] == loop["samples"] * seq_len
    assert tk["tokens_per_s"] == pytest.approx(loop["samples_per_s"] * seq_len, rel=1e-9)
    assert tk["steady_tokens_per_s"] == pytest.approx(loop["steady_samples_per_s"] * seq_len, rel=1e-9)
    assert loop["starvation"] == pytest.approx(loop["wait_s"] / loop["wall_s"], rel=1e-9)
    assert 0.0 <= loop["steady_starvation"] <= 1.0


@pytest.mark.parametrize("packing", ["concat", "best_fit"])
def test_token_loader_report_names_tokens_per_s_and_its_own_stats(flat, packing):
    loader = feedline.TokenLoader(flat, seq_len=SEQ, batch_size=BATCH, eos_token=EOS, packing=packing,
                                  pad_token=EOS, shuffle=True, num_threads=1, drop_last=True)
    try:
        r = _watch(loader, epochs=2)
        padding = loader.padding_share
    finally:
        loader.close()
    data = json.loads(r.to_json())
    assert feedline.doctor.validate(data)
    assert data["loader"]["kind"] == "feedline" and data["loader"]["type"] == "TokenLoader"
    settings = data["loader"]["settings"]
    assert settings["source_kind"] == "tokens" and settings["transform"] is None
    assert settings["seq_len"] == SEQ and settings["packing"] == packing
    assert "exact_decode" not in data["feedline"]
    assert [o["name"] for o in data["feedline"]["ops"]] == ["tokens"]
    _consistent(data, SEQ)
    tk = data["tokens"]
    assert tk["field"] == "input_ids"
    ld = tk["loader"]
    assert ld["packing"] == packing and ld["seq_len"] == SEQ
    assert [s["path"] for s in ld["sources"]] == [flat] and ld["sources"][0]["kind"] == "flat"
    assert ld["padding_share"] == padding
    if packing == "best_fit":
        assert padding > 0
        assert tk["real_tokens_per_s"] == pytest.approx(tk["steady_tokens_per_s"] * (1 - padding), rel=1e-9)
    else:
        assert padding == 0 and "real_tokens_per_s" not in tk
        assert ld["tail_tokens"] == loader.tail_tokens
    assert not undocumented(data), undocumented(data)
    assert TokenEvidence.from_json(tk).to_json() == tk
    text = r.summary()
    assert "feedline TokenLoader" in text and "tokens/s" in text and "waiting for data" in text
    assert f"packing={packing}" in text
    assert ("padding" in text.split("tokens    ")[1].split("\n  capacity")[0]) == (packing == "best_fit")


def test_token_mixture_reports_its_weights(flat, tmp_path):
    other = tmp_path / "other.bin"
    np.arange(1, 4000, dtype=np.uint16).tofile(other)
    loader = feedline.TokenLoader([flat, str(other)], seq_len=SEQ, batch_size=BATCH, weights=[3, 1],
                                  eos_token=EOS, num_threads=1)
    try:
        data = _watch(loader).data
    finally:
        loader.close()
    ld = data["tokens"]["loader"]
    assert ld["weights"] == [3.0, 1.0]
    assert [s["path"] for s in ld["sources"]] == [flat, str(other)]
    _consistent(data, SEQ)
    assert not undocumented(data), undocumented(data)


@pytest.mark.parametrize("workers", [0, 2])
def test_dataloader_over_a_memmap_reports_tokens_and_the_wait(flat, workers):
    """Each item sleeps SLEEP_S in the dataset, so the loop waits at least
    that long per sample it gets (time.sleep's guarantee, not a tolerance)."""
    ds = MemmapWindows(flat, SEQ, sleep_s=SLEEP_S)
    loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=workers, drop_last=True)
    data = json.loads(_watch(loader).to_json())
    assert feedline.doctor.validate(data)
    assert data["loader"]["kind"] == "torch"
    _consistent(data, SEQ)
    tk, loop = data["tokens"], data["loop"]
    assert tk["field"] == "x" and tk["loader"] is None
    assert loop["samples"] == len(ds) // BATCH * BATCH
    if workers == 0:  # every sample is loaded while the loop waits
        assert loop["wait_s"] >= loop["samples"] * SLEEP_S
    assert not undocumented(data), undocumented(data)
    text = feedline.doctor.Report(data).summary()
    assert "x [batch, 32]" in text and "waiting for data" in text


def test_an_image_loop_has_no_tokens_section(small_images):
    loader = feedline.Loader(small_images, batch_size=16, num_threads=1,
                             transform=feedline.transforms.imagenet_eval(32, resize=37))
    try:
        data = _watch(loader).data
    finally:
        loader.close()
    assert "tokens" not in data
    assert "tokens    " not in feedline.doctor.Report(data).summary()


def test_token_batches_are_recognised_only_when_certain():
    ids = torch.zeros(4, 16, dtype=torch.int64)
    assert count_tokens({"input_ids": ids, "labels": ids}) == 64
    assert token_field((ids, ids))[0] == "x" and count_tokens([ids, ids, ids]) == 64
    assert count_tokens((ids, torch.zeros(4, 15, dtype=torch.int64))) == 0  # not inputs and shifted targets
    assert count_tokens((torch.zeros(4, 3, 8, 8), torch.zeros(4, dtype=torch.int64))) == 0  # images, labels
    assert count_tokens((ids.float(), ids.float())) == 0
    assert count_tokens({"input_ids": torch.zeros(16, dtype=torch.int64)}) == 0  # one sequence, no batch
    assert count_tokens({"ids": ids}) == 0 and count_tokens(ids) == 0 and count_tokens([ids]) == 0
