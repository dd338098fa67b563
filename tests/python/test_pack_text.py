"""feedline.pack_text and `feedline pack-text` (python/feedline/pack_text.py,
tools/feedline/pack_text_cmd.cc): text tokenised with a tokenizer trained
here (nothing is downloaded) reads back through feedline.TokenLoader as
tokenizer.encode of each document + eos; the bytes are the same at 1 and 4
threads; a flipped byte is refused naming the file and the field; a bad
JSONL line is named, or skipped and counted with --skip-bad."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import feedline
from feedline.pack_text import BadRecord

tokenizers = pytest.importorskip("tokenizers")

SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "a loader that never starves the accelerator",
    "token shards carry checksums and a document index",
    "every document ends with its end of text token",
    "pack text on threads and get the same bytes",
    "the dog sleeps while the fox runs",
]


@pytest.fixture(scope="module")
def tokenizer_path(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=200, special_tokens=["[UNK]", "<|endoftext|>"])
    tok.train_from_iterator(SENTENCES * 4, trainer=trainer)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return str(path)


def _documents(n=300):
    # Varied lengths, some empty: an empty document is its eos alone.
    return [" ".join(SENTENCES[(i + j) % len(SENTENCES)] for j in range(i % 5)) for i in range(n)]


def _jsonl(path, docs, field="text"):
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({field: d, "id": 1}) + "\n")
    return str(path)


def _expected_ids(tokenizer_path, docs):
    tok = tokenizers.Tokenizer.from_file(tokenizer_path)
    eos = tok.token_to_id("<|endoftext|>")
    out = []
    for d in docs:
        out.extend(tok.encode(d, add_special_tokens=False).ids + [eos])
    return np.array(out, np.int64), eos


def _all_tokens(path, seq_len=1):
    """Every token of the dataset through feedline.TokenLoader (seq_len 1: window i is
    tokens [i, i + 2), so the inputs are tokens 0..T-2 and the last label is token T-1)."""
    loader = feedline.TokenLoader(path, seq_len=seq_len, batch_size=64, num_threads=1)
    ids, last = [], None
    for batch in loader:
        ids.append(batch["input_ids"][:, 0].numpy().copy())
        last = int(batch["labels"][-1, -1])
    loader.close()
    return np.concatenate(ids + [np.array([last])])


def test_packed_text_reads_back_as_encode_plus_eos(tmp_path, tokenizer_path):
    docs = _documents()
    m = feedline.pack_text(_jsonl(tmp_path / "in.jsonl", docs), tmp_path / "out", tokenizer_path,
                           num_threads=2, shard_tokens=500, batch_documents=7, progress=False)
    expected, eos = _expected_ids(tokenizer_path, docs)
    assert m["format"] == "feedline-tokens" and m["dtype"] == "uint16"
    assert m["documents"] == len(docs) and m["tokens"] == len(expected)
    assert len(m["shards"]) > 1
    assert m["tokenizer"]["eos_token"] == eos and m["tokenizer"]["eos_token_text"] == "<|endoftext|>"
    assert m["tokenizer"]["vocab_size"] == tokenizers.Tokenizer.from_file(tokenizer_path).get_vocab_size()
    np.testing.assert_array_equal(_all_tokens(str(tmp_path / "out")), expected)
    corpus = feedline._C.open_token_corpus([os.fsencode(tmp_path / "out")], "uint16")
    assert corpus.count_documents() == len(docs)
    assert corpus.sources[0]["kind"] == "token_shards"
    # Documents restart positions: a window holding an eos starts a new document after it.
    loader = feedline.TokenLoader(str(tmp_path / "out"), seq_len=32, batch_size=4, num_threads=1)
    batch = next(iter(loader))
    ids, docids = batch["input_ids"].numpy(), batch["document_ids"].numpy()
    for r in range(ids.shape[0]):
        for j in range(1, ids.shape[1]):
            assert docids[r, j] == docids[r, j - 1] + (1 if ids[r, j - 1] == eos else 0)
    loader.close()


def test_output_bytes_are_identical_at_1_and_4_threads(tmp_path, tokenizer_path):
    src = _jsonl(tmp_path / "in.jsonl", _documents(500))
    for threads in (1, 4):
        feedline.pack_text(src, tmp_path / f"t{threads}", tokenizer_path, num_threads=threads,
                           shard_tokens=1000, batch_documents=3, progress=False)
    names = sorted(os.listdir(tmp_path / "t1"))
    assert names == sorted(os.listdir(tmp_path / "t4")) and "manifest.json" in names and len(names) > 2
    for n in names:
        assert (tmp_path / "t1" / n).read_bytes() == (tmp_path / "t4" / n).read_bytes(), n


def test_a_flipped_byte_is_refused_naming_file_and_field(tmp_path, tokenizer_path):
    src = _jsonl(tmp_path / "in.jsonl", _documents(50))
    out = tmp_path / "out"
    feedline.pack_text(src, out, tokenizer_path, num_threads=1, progress=False)
    shard = out / "tokens-00000.flt"
    good = shard.read_bytes()
    # A token byte: the block checksum names it on the first read.
    b = bytearray(good)
    b[64 + 10] ^= 0x01
    shard.write_bytes(bytes(b))
    loader = feedline.TokenLoader(str(out), seq_len=16, batch_size=2, num_threads=1)
    with pytest.raises(feedline.Error, match=r"tokens-00000\.flt.*block_crcs\[0\].*checksum mismatch"):
        list(loader)
    loader.close()
    # A header byte (the vocabulary size): refused at open, naming the field.
    b = bytearray(good)
    b[40] ^= 0x01
    shard.write_bytes(bytes(b))
    with pytest.raises(feedline.Error, match=r"tokens-00000\.flt.*header_crc32c"):
        feedline.TokenLoader(str(out), seq_len=16, batch_size=2)


def test_a_bad_jsonl_line_is_named(tmp_path, tokenizer_path):
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "the dog"}\n{"text": "a fox"}\n{"text": broken\n{"body": "x"}\n{"text": 3}\n')
    with pytest.raises(BadRecord, match=r"in\.jsonl: line 3: not JSON"):
        feedline.pack_text(src, tmp_path / "out", tokenizer_path, progress=False)
    assert not (tmp_path / "out" / "manifest.json").exists()
    m = feedline.pack_text(src, tmp_path / "out2", tokenizer_path, skip_bad=True, progress=False)
    assert m["documents"] == 2 and m["num_skipped"] == 3
    assert m["skipped"][1].endswith("line 4: no field 'text'")
    assert m["skipped"][2].endswith("line 5: field 'text' is int, not a string")


def test_the_cli_runs_pack_text(tmp_path, tokenizer_path):
    fl = os.environ.get("FEEDLINE_BIN")
    if not fl:
        pytest.skip("FEEDLINE_BIN is not set")
    docs = _documents(40)
    src = _jsonl(tmp_path / "in.jsonl", docs, field="body")
    env = dict(os.environ, FEEDLINE_PYTHON=sys.executable)
    r = subprocess.run([fl, "pack-text", src, str(tmp_path / "out"), "--tokenizer", tokenizer_path,
                        "--field", "body", "--eos-token", "<|endoftext|>", "--threads", "2"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "pack-text: 40 documents" in r.stderr  # the progress line, on stderr
    np.testing.assert_array_equal(_all_tokens(str(tmp_path / "out")), _expected_ids(tokenizer_path, docs)[0])
    # Packing into a finished dataset is refused; a bad line fails with its number.
    r = subprocess.run([fl, "pack-text", src, str(tmp_path / "out"), "--tokenizer", tokenizer_path,
                        "--field", "body", "--quiet"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 1 and "already packed" in r.stderr
    r = subprocess.run([fl, "pack-text", src, str(tmp_path / "o2"), "--tokenizer", tokenizer_path, "--quiet"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 1 and "in.jsonl: line 1: no field 'text'" in r.stderr


def test_parquet_reads_a_named_column(tmp_path, tokenizer_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    docs = _documents(30)
    pq.write_table(pa.table({"content": docs}), tmp_path / "in.parquet")
    feedline.pack_text(tmp_path / "in.parquet", tmp_path / "out", tokenizer_path, field="content", progress=False)
    np.testing.assert_array_equal(_all_tokens(str(tmp_path / "out")), _expected_ids(tokenizer_path, docs)[0])
    with pytest.raises(ValueError, match=r"in\.parquet: no column 'text' \(columns: content\)"):
        feedline.pack_text(tmp_path / "in.parquet", tmp_path / "o2", tokenizer_path, progress=False)


def test_eos_is_required_when_the_tokenizer_has_none_of_the_usual(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(SENTENCES, trainer=trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    path = str(tmp_path / "wl.json")
    tok.save(path)
    src = _jsonl(tmp_path / "in.jsonl", SENTENCES)
    with pytest.raises(ValueError, match="pass --eos-token"):
        feedline.pack_text(src, tmp_path / "out", path, progress=False)
    m = feedline.pack_text(src, tmp_path / "out", path, eos_token=0, progress=False)
    assert m["tokenizer"]["eos_token"] == 0 and m["documents"] == len(SENTENCES)


def test_several_inputs_compressed_or_in_a_directory_pack_as_their_concatenation(tmp_path, tokenizer_path):
    """Files are read in the order given (a directory's in name order), .gz/.bz2/.xz JSONL
    decompressed: the shards equal those of the documents in one plain file, byte for byte
    (the manifest's source entry aside)."""
    import bz2
    import gzip
    import lzma
    docs = _documents(240)
    parts = [docs[:70], docs[70:150], docs[150:200], docs[200:]]
    one = _jsonl(tmp_path / "all.jsonl", docs)
    feedline.pack_text(one, tmp_path / "one", tokenizer_path, shard_tokens=900, progress=False)
    d = tmp_path / "parts"
    d.mkdir()
    for i, (part, opener, suffix) in enumerate(zip(parts, (open, gzip.open, bz2.open, lzma.open),
                                                     ("", ".gz", ".bz2", ".xz"))):
        with opener(d / f"part-{i}.jsonl{suffix}", "wt", encoding="utf-8") as f:
            f.writelines(json.dumps({"text": t}) + "\n" for t in part)
    (d / "README.md").write_text("not an input")  # skipped: not JSONL or Parquet
    listed = [d / f"part-{i}.jsonl{s}" for i, s in enumerate(("", ".gz", ".bz2", ".xz"))]
    for name, inputs in (("dir", d), ("list", listed)):
        threads = 1 if name == "dir" else 3
        m = feedline.pack_text(inputs, tmp_path / name, tokenizer_path, shard_tokens=900, num_threads=threads,
                               progress=False)
        assert m["documents"] == len(docs)
        assert m["source"]["files"] == [p.name for p in listed]
        names = sorted(os.listdir(tmp_path / "one"))
        assert names == sorted(os.listdir(tmp_path / name)) and len(names) > 2
        for n in names:
            if n != "manifest.json":
                assert (tmp_path / "one" / n).read_bytes() == (tmp_path / name / n).read_bytes(), (name, n)
    np.testing.assert_array_equal(_all_tokens(str(tmp_path / "dir")), _expected_ids(tokenizer_path, docs)[0])


def test_a_truncated_compressed_input_is_an_error_naming_it(tmp_path, tokenizer_path):
    import gzip
    src = tmp_path / "in.jsonl.gz"
    with gzip.open(src, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps({"text": t}) + "\n" for t in _documents(400))
    data = src.read_bytes()
    src.write_bytes(data[:len(data) * 2 // 3])
    with pytest.raises(ValueError, match=r"in\.jsonl\.gz: the compressed stream is broken after line \d+"):
        feedline.pack_text(src, tmp_path / "out", tokenizer_path, progress=False)
    assert not (tmp_path / "out" / "manifest.json").exists()
    with pytest.raises(FileNotFoundError, match="missing.jsonl: no such file"):
        feedline.pack_text([src, tmp_path / "missing.jsonl"], tmp_path / "o2", tokenizer_path, progress=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="a directory with no JSONL or Parquet files"):
        feedline.pack_text(empty, tmp_path / "o3", tokenizer_path, progress=False)


def test_token_loader_tokenises_parquet_text_once_into_the_cache(tmp_path, tokenizer_path):
    """TokenLoader(parquet, tokenizer=): the same sequences as packing first by hand; a second
    loader reuses the cache entry; a changed file is a new entry; text without a tokenizer is
    refused saying what to pass."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    docs = _documents(120)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    pq.write_table(pa.table({"text": docs[:70]}), corpus / "000.parquet", row_group_size=16)
    pq.write_table(pa.table({"text": docs[70:]}), corpus / "001.parquet", row_group_size=16)
    feedline.pack_text(corpus, tmp_path / "by-hand", tokenizer_path, progress=False)
    cache = tmp_path / "cache"

    def batches(src, **kw):
        loader = feedline.TokenLoader(src, seq_len=16, batch_size=4, shuffle=True, seed=2, num_threads=1, **kw)
        return [b["input_ids"].clone() for b in loader], loader  # clones: the ring buffers go back

    ref, _ = batches(tmp_path / "by-hand")
    got, loader = batches(corpus, tokenizer=tokenizer_path, cache_dir=cache)
    assert len(got) == len(ref) > 3 and all(torch.equal(a, b) for a, b in zip(ref, got))
    entries = sorted(p.name for p in cache.iterdir())
    assert len(entries) == 1 and (cache / entries[0] / "cache-key.json").exists()
    stamp = (cache / entries[0] / "manifest.json").stat().st_mtime_ns
    again, _ = batches(corpus, tokenizer=tokenizer_path, cache_dir=cache)
    assert all(torch.equal(a, b) for a, b in zip(ref, again))
    assert (cache / entries[0] / "manifest.json").stat().st_mtime_ns == stamp  # not packed again
    pq.write_table(pa.table({"text": docs[70:] + ["one more document"]}), corpus / "001.parquet")
    batches(corpus, tokenizer=tokenizer_path, cache_dir=cache)
    assert len(list(cache.iterdir())) == 2
    with pytest.raises(ValueError, match="is text .* pass tokenizer="):
        feedline.TokenLoader(corpus, seq_len=16, batch_size=4)
