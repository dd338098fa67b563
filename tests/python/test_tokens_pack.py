"""feedline.TokenLoader's packing and mixtures (python/feedline/tokens.py,
python/bindings/token_bindings.cc): cu_seqlens joined from the workers'
document starts, best-fit packing and its padding share, and weighted
mixtures with exact and elastic resume and weight changes (docs/tokens.md)."""
import itertools

import numpy as np
import pytest
import torch

import feedline
from feedline.tokens import cu_seqlens


def _flat(path, tokens, dtype=np.uint16):
    np.asarray(tokens, dtype=dtype).tofile(path)
    return str(path)


def _eos_corpus(tmp_path, docs=60, eos=0):
    rng = np.random.default_rng(5)
    parts = []
    for _ in range(docs):
        parts.append(rng.integers(1, 900, int(rng.integers(1, 40))))
        parts.append([eos])
    return np.concatenate(parts).astype(np.uint16)


def test_cu_seqlens_come_from_the_workers_document_starts(tmp_path):
    tokens = _eos_corpus(tmp_path)
    path = _flat(tmp_path / "a.bin", tokens)
    loader = feedline.TokenLoader(path, seq_len=32, batch_size=4, eos_token=0, shuffle=True, num_threads=2)
    raw = next(iter(loader.batches()))
    assert raw.fields["document_starts"].dtype == torch.int32
    assert raw.fields["num_documents"].shape == (4,)
    del raw
    batches = 0
    for batch in loader:
        assert "document_starts" not in batch and "num_documents" not in batch
        assert torch.equal(batch["cu_seqlens"], cu_seqlens(batch["document_ids"]))
        batches += 1
    assert batches == len(loader)


@pytest.mark.parametrize("packing", ["concat", "best_fit"])
def test_the_engine_joins_cu_seqlens_as_the_python_join_does(tmp_path, packing):
    # next(cu_seqlens=True) replaces the two segment-start fields by their
    # join, in C++: the same array token_cu_seqlens makes from the raw fields.
    path = _flat(tmp_path / "a.bin", _eos_corpus(tmp_path))
    kw = dict(seq_len=32, batch_size=4, eos_token=0, shuffle=True, seed=3, num_threads=2, packing=packing,
              pad_token=0 if packing == "best_fit" else None)
    raw_loader, joined_loader = feedline.TokenLoader(path, **kw), feedline.TokenLoader(path, **kw)
    batches = 0
    while True:
        raw, joined = raw_loader._loader.next(), joined_loader._loader.next(cu_seqlens=True)
        if raw is None:
            assert joined is None
            break
        r = dict(zip(raw["names"], raw["fields"]))
        j = dict(zip(joined["names"], joined["fields"]))
        assert "document_starts" not in j and "num_documents" not in j
        want_names = [{"document_starts": "cu_seqlens"}.get(n, n) for n in raw["names"] if n != "num_documents"]
        assert joined["names"] == want_names
        assert dict(zip(joined["names"], joined["dtypes"]))["cu_seqlens"] == "int32"
        want = feedline._C.token_cu_seqlens(r["document_starts"], r["num_documents"])
        np.testing.assert_array_equal(j["cu_seqlens"], want)
        np.testing.assert_array_equal(j["input_ids"], r["input_ids"])
        batches += 1
        del raw, joined, r, j
    assert batches == len(raw_loader)
    # Without segment starts (fields= leaves cu_seqlens out) nothing is joined.
    plain = feedline.TokenLoader(path, fields=("input_ids", "labels"), **kw)
    d = plain._loader.next(cu_seqlens=True)
    assert d["names"] == ["input_ids", "labels"]
    del d


def test_best_fit_pads_little_masks_labels_and_reports_the_share(tmp_path):
    tokens = _eos_corpus(tmp_path, docs=200)
    path = _flat(tmp_path / "a.bin", tokens)
    with pytest.raises(ValueError, match="pad_token"):
        feedline.TokenLoader(path, seq_len=64, batch_size=4, eos_token=0, packing="best_fit")
    with pytest.raises(ValueError, match="packing"):
        feedline.TokenLoader(path, seq_len=64, batch_size=4, packing="greedy")
    loader = feedline.TokenLoader(path, seq_len=64, batch_size=4, eos_token=0, packing="best_fit",
                                  pad_token=1000, shuffle=True, num_threads=2)
    pad = seen = 0
    inputs = []
    for batch in loader:
        ids, labels, docs = batch["input_ids"], batch["labels"], batch["document_ids"]
        padding = docs == -1
        assert bool((ids[padding] == 1000).all()) and bool((labels[padding] == -100).all())
        # Each eos ends its document: no target after it, nothing across documents.
        assert bool((labels[(ids == 0) & ~padding] == -100).all())
        assert torch.equal(batch["cu_seqlens"], cu_seqlens(docs))
        pad += int(padding.sum())
        seen += ids.numel()
        inputs.append(ids[~padding])
    # Every token once; the share is the one reported.
    assert sorted(torch.cat(inputs).tolist()) == sorted(tokens.tolist())
    assert loader.padding_share == pytest.approx(pad / seen)
    assert loader.stats()["tokens"]["padding_share"] == loader.padding_share
    assert loader.stats()["tokens"]["packing"] == "best_fit"
    assert 0 < loader.padding_share < 0.05


def _mixture_sources(tmp_path):
    # Source k's tokens are 10000 * (k + 1) + position: a row's first token
    # names its source and window.
    paths = []
    for k, windows in enumerate((12, 6, 4)):
        paths.append(_flat(tmp_path / f"s{k}.bin", 10000 * (k + 1) + np.arange(windows * 8 + 1)))
    return paths


def _stream(loader, epoch=0):
    """(source, window) of each row of each batch from the loader's position
    on, going on into epoch + 1, ... at each end (`epoch`: the one being
    iterated)."""
    while True:
        for batch in loader:
            first = batch["input_ids"][:, 0].tolist()
            yield [(t // 10000 - 1, (t % 10000) // 8) for t in first]
        epoch += 1
        loader.set_epoch(epoch)


def _draws(loader, batches, epoch=0):
    return list(itertools.islice(_stream(loader, epoch), batches))


def _counts(batch, sources=3):
    return [sum(1 for s, _ in batch if s == k) for k in range(sources)]


def test_mixture_shares_resume_elastic_and_weight_change(tmp_path):
    paths = _mixture_sources(tmp_path)
    kw = dict(seq_len=8, shuffle=True, seed=4, num_threads=2, elastic=True)
    weights = [0.5, 0.3, 0.2]
    whole = feedline.TokenLoader(paths, batch_size=10, weights=weights, rank=0, world_size=1, **kw)
    assert whole.num_windows == 20  # 22 sequences, rounded down to global batches of 10
    reference = _draws(whole, 8)
    for batch in reference:
        assert _counts(batch) == [5, 3, 2]
    # Resume after 3 batches on 2 ranks of 5: the same global batches.
    first = feedline.TokenLoader(paths, batch_size=10, weights=weights, rank=0, world_size=1, **kw)
    assert _draws(first, 3) == reference[:3]
    state = first.state_dict()
    assert state["mixture"]["weights"] == weights
    ranks = [feedline.TokenLoader(paths, batch_size=5, weights=weights, rank=r, world_size=2, **kw)
             for r in range(2)]
    for r in ranks:
        r.load_state_dict(state)
    halves = [_draws(r, 4, epoch=1) for r in ranks]
    for b in range(4):
        merged = [halves[p % 2][b][p // 2] for p in range(10)]
        assert merged == reference[3 + b]
    # New weights from the resumed batch on; each source's draws continue.
    changed = feedline.TokenLoader(paths, batch_size=10, weights=[0.1, 0.1, 0.8], rank=0, world_size=1, **kw)
    changed.load_state_dict(state)
    stream = _stream(changed, epoch=1)
    after = list(itertools.islice(stream, 4))
    for batch in after:
        assert _counts(batch) == [1, 1, 8]
    draws = [d for b in reference[:3] + after for d in b]
    for k, n in enumerate((12, 6, 4)):
        mine = [w for s, w in draws if s == k]
        for e in range(0, len(mine) - n + 1, n):  # each whole epoch of the source is a permutation
            assert sorted(mine[e:e + n]) == list(range(n)), (k, e)
    # Its own state carries the new segment and resumes exactly.
    again = feedline.TokenLoader(paths, batch_size=10, weights=[0.1, 0.1, 0.8], rank=0, world_size=1, **kw)
    mid = changed.state_dict()
    tail = list(itertools.islice(stream, 2))
    again.load_state_dict(mid)
    assert _draws(again, 2, epoch=3) == tail


def test_mixture_state_is_refused_on_other_sources_and_without_weights(tmp_path):
    paths = _mixture_sources(tmp_path)
    a = feedline.TokenLoader(paths, seq_len=8, batch_size=10, weights=[1, 1, 1], rank=0, world_size=1)
    state = a.state_dict()
    other = feedline.TokenLoader(paths[::-1], seq_len=8, batch_size=10, weights=[1, 1, 1], rank=0, world_size=1)
    with pytest.raises(ValueError, match="other token sources"):
        other.load_state_dict(state)
    plain = feedline.TokenLoader(paths, seq_len=8, batch_size=10, rank=0, world_size=1)
    with pytest.raises(ValueError, match="mixture"):
        plain.load_state_dict(state)
    with pytest.raises(ValueError, match="weights"):
        feedline.TokenLoader(paths, seq_len=8, batch_size=10, weights=[1, 1])
