"""feedline.TokenLoader (python/feedline/tokens.py, python/bindings/token_bindings.cc):
windows exactly as in generated corpora, the engine's order (shuffle, ranks,
resume, elastic world size) over them, cu_seqlens at document boundaries, and
a Megatron dataset written here from the index spec (docs/tokens.md)."""
import struct

import numpy as np
import pytest
import torch

import feedline
from feedline.tokens import cu_seqlens


def _reference(tokens, seq_len, doc_starts):
    """Every window as the spec says: tokens, shifted labels, positions and
    document ids restarting at each document start inside the window."""
    starts = set(int(s) for s in doc_starts)
    n = (len(tokens) - 1) // seq_len
    out = []
    for i in range(n):
        b = i * seq_len
        pos, doc, p, d = [], [], 0, 0
        for j in range(seq_len):
            if j > 0 and b + j in starts:
                p, d = 0, d + 1
            pos.append(p)
            doc.append(d)
            p += 1
        out.append({"input_ids": tokens[b:b + seq_len].astype(np.int64),
                    "labels": tokens[b + 1:b + seq_len + 1].astype(np.int64),
                    "position_ids": np.array(pos, np.int64), "document_ids": np.array(doc, np.int64)})
    return out


def _rows(loader):
    """One epoch as a list of per-window dicts of numpy arrays, and the batches."""
    rows, batches = [], []
    for batch in loader:
        batches.append({k: v.clone() for k, v in batch.items()})
        for i in range(batch["input_ids"].shape[0]):
            rows.append({k: batch[k][i].numpy().copy() for k in ("input_ids", "labels", "position_ids",
                                                               "document_ids")})
    return rows, batches


def _assert_rows_equal(rows, expected):
    assert len(rows) == len(expected)
    for i, (r, e) in enumerate(zip(rows, expected)):
        for k in e:
            np.testing.assert_array_equal(r[k], e[k], err_msg=f"window {i}, {k}")


def _flat(path, tokens, dtype=np.uint16):
    np.asarray(tokens, dtype=dtype).tofile(path)
    return str(path)


def _window_ids(batch, seq_len):
    # With tokens = arange, a window's first token names it.
    return [int(x) // seq_len for x in batch["input_ids"][:, 0]]


def _write_megatron(prefix, documents, dtype=np.uint16, code=8):
    """A Megatron-LM indexed dataset from the spec: MMIDIDX, version 1,
    dtype code, counts, int32 lengths, int64 byte pointers, int64 document
    indices (0, then the sequence count after each document)."""
    lengths, pointers, doc_idx, ptr, data = [], [], [0], 0, []
    for doc in documents:
        for seq in doc:
            lengths.append(len(seq))
            pointers.append(ptr)
            ptr += len(seq) * np.dtype(dtype).itemsize
            data.extend(seq)
        doc_idx.append(len(lengths))
    np.asarray(data, dtype=dtype).tofile(f"{prefix}.bin")
    with open(f"{prefix}.idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", code))
        f.write(struct.pack("<Q", len(lengths)) + struct.pack("<Q", len(doc_idx)))
        f.write(np.asarray(lengths, np.int32).tobytes() + np.asarray(pointers, np.int64).tobytes())
        f.write(np.asarray(doc_idx, np.int64).tobytes())
    return np.asarray(data, dtype=np.int64)


def test_windows_are_the_files_tokens_with_shifted_labels(tmp_path):
    tokens = np.random.default_rng(0).integers(0, 50257, size=1003).astype(np.uint16)
    loader = feedline.TokenLoader(_flat(tmp_path / "a.bin", tokens), seq_len=16, batch_size=5, num_threads=2)
    assert loader.num_tokens == 1003 and loader.num_windows == 62 and loader.tail_tokens == 1003 - 1 - 62 * 16
    assert len(loader) == 13  # ceil(62 / 5): the last batch is short
    rows, batches = _rows(loader)
    _assert_rows_equal(rows, _reference(tokens, 16, [0]))
    assert batches[-1]["input_ids"].shape == (2, 16)
    for b in batches:
        assert set(b) == {"input_ids", "labels", "position_ids", "document_ids", "cu_seqlens"}
        assert all(b[k].dtype == torch.int64 for k in ("input_ids", "labels", "position_ids", "document_ids"))


def test_uint32_ids_above_16_bits_read_back(tmp_path):
    tokens = np.random.default_rng(1).integers(0, 200_000, size=257).astype(np.uint32)
    loader = feedline.TokenLoader(_flat(tmp_path / "a.bin", tokens, np.uint32), seq_len=8, batch_size=4,
                                  dtype="uint32", num_threads=1)
    rows, _ = _rows(loader)
    _assert_rows_equal(rows, _reference(tokens, 8, [0]))
    assert max(int(r["input_ids"].max()) for r in rows) > 65535


def test_eos_restarts_positions_and_documents_and_cu_seqlens_follow(tmp_path):
    rng = np.random.default_rng(2)
    tokens = rng.integers(1, 1000, size=2001).astype(np.uint16)
    tokens[rng.choice(2000, size=120, replace=False)] = 0  # eos
    starts = [0] + [i + 1 for i in np.flatnonzero(tokens[:-1] == 0)]
    loader = feedline.TokenLoader(_flat(tmp_path / "a.bin", tokens), seq_len=32, batch_size=4, eos_token=0,
                                  num_threads=2)
    rows, batches = _rows(loader)
    _assert_rows_equal(rows, _reference(tokens, 32, starts))
    assert any(r["document_ids"].max() >= 2 for r in rows)
    for b in batches:
        # cu_seqlens by hand: a sequence starts at each row and at each document change inside it.
        expect, flat = [], b["document_ids"].numpy()
        for r in range(flat.shape[0]):
            for j in range(flat.shape[1]):
                if j == 0 or flat[r, j] != flat[r, j - 1]:
                    expect.append(r * flat.shape[1] + j)
        expect.append(flat.size)
        assert b["cu_seqlens"].dtype == torch.int32
        assert b["cu_seqlens"].tolist() == expect
        lengths = b["cu_seqlens"].diff()
        assert int(lengths.sum()) == flat.size and int(lengths.min()) > 0


def test_masked_cross_document_labels_are_megatrons_eod_mask_and_the_source_boundary(tmp_path):
    # mask_cross_document_labels: -100 wherever the input is eos (the label
    # starts the next document: Megatron-LM's eod_mask_loss) and where the
    # label is the second source's first token; elsewhere the default's
    # labels, and every other key unchanged. A state saved with the mask
    # resumes without it: only labels differ.
    rng = np.random.default_rng(21)
    a = rng.integers(1, 1000, size=701).astype(np.uint16)
    a[rng.choice(700, size=40, replace=False)] = 0
    a[-1] = 7  # a's last document runs into b: no eos there
    b = rng.integers(1, 1000, size=300).astype(np.uint16)
    b[::23] = 0
    paths = [_flat(tmp_path / "a.bin", a), _flat(tmp_path / "b.bin", b)]
    tokens = np.concatenate([a, b]).astype(np.int64)
    seq_len = 16
    args = dict(seq_len=seq_len, batch_size=4, eos_token=0, num_threads=2)
    keep = [dict(x) for x in feedline.TokenLoader(paths, **args)]
    loader = feedline.TokenLoader(paths, mask_cross_document_labels=True, **args)
    assert loader.stats()["tokens"]["mask_cross_document_labels"] is True
    masked = [dict(x) for x in loader]
    assert len(masked) == len(keep) == len(loader)
    window = 0
    for k, m in zip(keep, masked):
        for key in ("input_ids", "position_ids", "document_ids", "cu_seqlens"):
            assert torch.equal(k[key], m[key]), key
        for r in range(m["labels"].shape[0]):
            at = window * seq_len + 1 + np.arange(seq_len)  # the labels' token offsets
            np.testing.assert_array_equal(k["labels"][r].numpy(), tokens[at])
            cross = (tokens[at - 1] == 0) | (at == len(a))
            want = np.where(cross, -100, tokens[at])
            np.testing.assert_array_equal(m["labels"][r].numpy(), want, err_msg=f"window {window}")
            window += 1
    assert sum(int((m["labels"] == -100).sum()) for m in masked) > 40
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    del it
    resumed = feedline.TokenLoader(paths, **args)
    resumed.load_state_dict(state)
    rest = [dict(x) for x in resumed]
    assert len(rest) == len(keep) - 1
    assert all(torch.equal(x["labels"], y["labels"]) for x, y in zip(rest, keep[1:]))


def test_cu_seqlens_of_a_hand_made_batch():
    doc = torch.tensor([[0, 0, 1, 1, 1], [0, 1, 2, 2, 2]])
    assert cu_seqlens(doc).tolist() == [0, 2, 5, 6, 7, 10]
    assert cu_seqlens(torch.zeros(3, 1, dtype=torch.int64)).tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        cu_seqlens(torch.zeros(4, dtype=torch.int64))


def test_shuffle_is_a_permutation_of_windows_that_differs_per_epoch(tmp_path):
    seq_len = 8
    path = _flat(tmp_path / "a.bin", np.arange(50 * seq_len + 1))
    loader = feedline.TokenLoader(path, seq_len=seq_len, batch_size=6, shuffle=True, seed=3, num_threads=2)
    orders = []
    for epoch in range(3):
        loader.set_epoch(epoch)
        orders.append([w for b in loader for w in _window_ids(b, seq_len)])
    for order in orders:
        assert sorted(order) == list(range(50))
    assert orders[0] != orders[1] and orders[1] != orders[2] and orders[0] != list(range(50))
    again = feedline.TokenLoader(path, seq_len=seq_len, batch_size=6, shuffle=True, seed=3, num_threads=1)
    again.set_epoch(1)
    assert [w for b in again for w in _window_ids(b, seq_len)] == orders[1]


def test_two_ranks_see_disjoint_halves_of_each_global_batch(tmp_path):
    seq_len, per_rank = 4, 3
    path = _flat(tmp_path / "a.bin", np.arange(40 * seq_len + 1))
    common = dict(seq_len=seq_len, shuffle=True, seed=5, drop_last=True, num_threads=1)
    whole = [_window_ids(b, seq_len) for b in feedline.TokenLoader(path, batch_size=2 * per_rank, rank=0,
                                                                   world_size=1, **common)]
    ranks = [[_window_ids(b, seq_len) for b in feedline.TokenLoader(path, batch_size=per_rank, rank=r,
                                                                    world_size=2, **common)] for r in range(2)]
    assert len(ranks[0]) == len(ranks[1]) == len(whole) == 40 // 6
    for b, g in enumerate(whole):
        assert not set(ranks[0][b]) & set(ranks[1][b])
        assert sorted(ranks[0][b] + ranks[1][b]) == sorted(g)
        assert ranks[0][b] == g[0::2] and ranks[1][b] == g[1::2]  # rank r reads positions r mod 2


@pytest.mark.parametrize("stop", [0, 3, 7])
def test_resume_mid_epoch_gives_exactly_the_remaining_batches(tmp_path, stop):
    tokens = np.random.default_rng(4).integers(0, 5000, size=30 * 16 + 5).astype(np.uint16)
    tokens[::37] = 0
    path = _flat(tmp_path / "a.bin", tokens)
    args = dict(seq_len=16, batch_size=3, shuffle=True, seed=11, eos_token=0, num_threads=2)
    first = feedline.TokenLoader(path, **args)
    first.set_epoch(2)
    seen, state = [], None
    for i, b in enumerate(first):
        seen.append({k: v.clone() for k, v in b.items()})
        if i == stop:
            state = first.state_dict()  # the position before batch stop + 1
    resumed = feedline.TokenLoader(path, **args)
    resumed.load_state_dict(state)
    rest = [{k: v.clone() for k, v in b.items()} for b in resumed]
    assert len(rest) == len(seen) - stop - 1
    for a, b in zip(rest, seen[stop + 1:]):
        for k in a:
            assert torch.equal(a[k], b[k]), k
    assert resumed.epoch == 3  # the next iteration runs the next epoch


def test_resume_on_another_world_size_gives_the_same_global_batches(tmp_path):
    seq_len = 4
    path = _flat(tmp_path / "a.bin", np.arange(48 * seq_len + 1))
    common = dict(seq_len=seq_len, shuffle=True, seed=9, drop_last=True, num_threads=1, elastic=True)
    whole = [_window_ids(b, seq_len) for b in feedline.TokenLoader(path, batch_size=8, world_size=1, rank=0,
                                                                   **common)]
    two = feedline.TokenLoader(path, batch_size=4, world_size=2, rank=1, **common)
    it = iter(two)
    for _ in range(2):
        next(it)
    state = two.state_dict()  # before global batch 2
    del it
    four = []
    for r in range(4):
        loader = feedline.TokenLoader(path, batch_size=2, world_size=4, rank=r, **common)
        loader.load_state_dict(state)
        four.append([_window_ids(b, seq_len) for b in loader])
    assert all(len(f) == len(whole) - 2 for f in four)
    for b in range(len(whole) - 2):
        assert sorted(w for f in four for w in f[b]) == sorted(whole[b + 2])


def test_resume_without_elastic_on_another_world_size_is_refused(tmp_path):
    path = _flat(tmp_path / "a.bin", np.arange(100))
    state = feedline.TokenLoader(path, seq_len=4, batch_size=4, world_size=2, rank=0).state_dict()
    other = feedline.TokenLoader(path, seq_len=4, batch_size=2, world_size=4, rank=0)
    with pytest.raises(ValueError, match="world_size"):
        other.load_state_dict(state)


def test_a_state_from_another_corpus_or_seq_len_is_refused(tmp_path):
    a = _flat(tmp_path / "a.bin", np.arange(101))
    b = _flat(tmp_path / "b.bin", np.arange(101) + 1)
    state = feedline.TokenLoader(a, seq_len=10, batch_size=2).state_dict()
    with pytest.raises(ValueError, match="fingerprint"):
        feedline.TokenLoader(b, seq_len=10, batch_size=2).load_state_dict(state)
    with pytest.raises(ValueError):
        feedline.TokenLoader(a, seq_len=5, batch_size=4).load_state_dict(state)


def test_megatron_dataset_written_from_the_spec_reads_back_exactly(tmp_path):
    rng = np.random.default_rng(6)
    documents = []
    for _ in range(40):  # documents of 1 to 3 sequences, 1 to 30 tokens each
        documents.append([rng.integers(0, 60000, size=rng.integers(1, 31)).tolist()
                          for _ in range(rng.integers(1, 4))])
    documents.insert(5, [])  # an empty document: Megatron writes them too
    prefix = str(tmp_path / "corpus_text_document")
    tokens = _write_megatron(prefix, documents)
    starts, t = [], 0
    for doc in documents:
        if doc and (not starts or starts[-1] != t):
            starts.append(t)
        t += sum(len(s) for s in doc)
    for source in (prefix, prefix + ".bin"):
        loader = feedline.TokenLoader(source, seq_len=24, batch_size=4, num_threads=2)
        assert loader.stats()["tokens"]["sources"][0]["kind"] == "megatron"
        rows, _ = _rows(loader)
        _assert_rows_equal(rows, _reference(tokens, 24, starts))
    assert any(r["document_ids"].max() > 0 for r in rows)


def test_megatron_int32_and_sources_concatenated_in_order(tmp_path):
    mega = _write_megatron(str(tmp_path / "m"), [[[100000, 1, 2]], [[3, 4]]], np.int32, 4)
    flat = np.arange(7, 20)
    path = _flat(tmp_path / "f.bin", flat)
    loader = feedline.TokenLoader([str(tmp_path / "m"), path], seq_len=3, batch_size=2, num_threads=1)
    tokens = np.concatenate([mega, flat])
    rows, _ = _rows(loader)
    _assert_rows_equal(rows, _reference(tokens, 3, [0, 3, 5]))
    assert [s["offset"] for s in loader.stats()["tokens"]["sources"]] == [0, 5]


def test_corrupt_megatron_index_names_file_field_and_value(tmp_path):
    prefix = str(tmp_path / "bad")
    _write_megatron(prefix, [[[1, 2, 3]], [[4, 5]]])
    idx = bytearray(open(prefix + ".idx", "rb").read())
    idx[34 + 4:34 + 8] = struct.pack("<i", 50)  # sequence 1 claims 50 tokens
    open(prefix + ".idx", "wb").write(bytes(idx))
    with pytest.raises(feedline.Error, match=r"bad\.idx.*sequence_lengths\[1\] = 50.*bad\.bin"):
        feedline.TokenLoader(prefix, seq_len=2, batch_size=1)


def test_flat_file_not_a_multiple_of_the_dtype_names_file_and_size(tmp_path):
    p = tmp_path / "odd.bin"
    p.write_bytes(b"\x01" * 9)
    with pytest.raises(feedline.Error, match=r"odd\.bin.*size 9 bytes.*uint16"):
        feedline.TokenLoader(str(p), seq_len=2, batch_size=1)


def test_bad_arguments_are_refused(tmp_path):
    path = _flat(tmp_path / "a.bin", np.arange(10))
    with pytest.raises(ValueError, match="seq_len"):
        feedline.TokenLoader(path, seq_len=0, batch_size=1)
    with pytest.raises(ValueError, match="at least one source"):
        feedline.TokenLoader([], seq_len=2, batch_size=1)
    with pytest.raises(ValueError, match="dtype 'float16'"):
        feedline.TokenLoader(path, seq_len=2, batch_size=1, dtype="float16")
    with pytest.raises(ValueError, match="10 tokens"):
        feedline.TokenLoader(path, seq_len=10, batch_size=1)
    with pytest.raises(FileNotFoundError, match="missing.bin"):
        feedline.TokenLoader(str(tmp_path / "missing.bin"), seq_len=2, batch_size=1)


def test_rank_and_world_size_default_from_the_environment(tmp_path, monkeypatch):
    seq_len = 4
    path = _flat(tmp_path / "a.bin", np.arange(20 * seq_len + 1))
    explicit = [_window_ids(b, seq_len) for b in feedline.TokenLoader(path, seq_len=seq_len, batch_size=2, rank=1,
                                                                      world_size=2, num_threads=1)]
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    loader = feedline.TokenLoader(path, seq_len=seq_len, batch_size=2, num_threads=1)
    assert (loader.rank, loader.world_size) == (1, 2)
    assert [_window_ids(b, seq_len) for b in loader] == explicit
    assert explicit[0] == [1, 3]


@pytest.mark.parametrize("packing", ["concat", "best_fit"])
def test_fields_leave_out_what_is_not_asked_and_keep_the_rest_exact(tmp_path, packing):
    rng = np.random.default_rng(5)
    tokens = rng.integers(1, 1000, size=3001).astype(np.uint16)
    tokens[rng.choice(3000, size=90, replace=False)] = 0  # eos
    path = _flat(tmp_path / "a.bin", tokens)
    kw = dict(seq_len=32, batch_size=4, eos_token=0, num_threads=2, shuffle=True, seed=3, packing=packing,
              pad_token=1 if packing == "best_fit" else None)
    with feedline.TokenLoader(path, **kw) as loader:
        full = [dict(b) for b in loader]
    for fields in [("input_ids", "labels"), ("labels", "input_ids", "cu_seqlens"),
                   ("input_ids", "labels", "position_ids"), feedline.tokens.TOKEN_FIELDS]:
        _check_field_subset(path, fields, kw, full)


def _check_field_subset(path, fields, kw, full):
    with feedline.TokenLoader(path, fields=fields, **kw) as loader:
        assert loader.token_fields == tuple(f for f in feedline.tokens.TOKEN_FIELDS if f in fields)
        got = list(loader)
        assert len(got) == len(full)
        for g, f in zip(got, full):
            assert set(g) == set(fields)
            for k in g:
                assert torch.equal(g[k], f[k]), (fields, k)
        # batches() carries the engine's fields: the segment starts only with cu_seqlens.
        b = next(iter(loader.batches()))
        assert ("document_starts" in b.fields) == ("cu_seqlens" in fields)
        del b


def test_fields_must_hold_input_ids_and_labels_and_known_names(tmp_path):
    path = _flat(tmp_path / "a.bin", np.arange(100))
    with pytest.raises(ValueError, match="holding 'input_ids' and 'labels'"):
        feedline.TokenLoader(path, seq_len=4, batch_size=1, fields=("input_ids",))
    with pytest.raises(ValueError, match=r"unknown: \['attention_mask'\]"):
        feedline.TokenLoader(path, seq_len=4, batch_size=1, fields=("input_ids", "labels", "attention_mask"))
