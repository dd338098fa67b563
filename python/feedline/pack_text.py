"""feedline.pack_text: JSONL or Parquet text into feedline token shards (docs/token_shards.md).

Tokenises with the Hugging Face ``tokenizers`` library on threads, appends an
end-of-document token to every document and writes the shards through the
C++ TokenShardWriter (checksums, .partial names, fsync, rename, manifest
last). Documents are written in input order whatever the thread count, so
the output bytes are the same at 1 or 64 threads.

Tokenising lives in Python because the tokenizers library is a Rust crate
with Python bindings and no C API packaged in Debian; the format, its
checksums and its crash safety stay in C++ (one writer, one reader).

    python -m feedline.pack_text IN [IN ...] OUT --tokenizer tokenizer.json [--field text] [--eos-token ID|NAME]
    feedline pack-text IN [IN ...] OUT --tokenizer tokenizer.json ...

IN: JSONL files, plain or compressed (.gz, .bz2, .xz; .zst with the zstandard
package), Parquet files, or directories of them (their files in name order);
documents are written file after file, in the order given. Parquet may also be
an s3:// object or prefix (its .parquet objects in key order: FineWeb's layout)
or an http(s):// URL, read with ranged requests through feedline's client
(the endpoint and credentials as for every s3:// name: docs/object_stores.md).
"""
from __future__ import annotations

import argparse
import bz2
import concurrent.futures
import gzip
import hashlib
import io
import json
import lzma
import os
import sys
import time
import types
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

# The names an end-of-document token usually has, tried in this order.
USUAL_EOS_TOKENS = ("<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "[EOS]")

PathLike = Union[str, "os.PathLike[str]"]


class BadRecord(ValueError):
    """A JSONL line or Parquet row that holds no text: names file, line (or row) and reason."""

    def __init__(self, path: str, unit: str, number: int, reason: str) -> None:
        super().__init__(f"{path}: {unit} {number}: {reason}")
        self.path, self.unit, self.number, self.reason = path, unit, number, reason


# JSONL compressions read as streams (name suffix -> opener); .zst needs the zstandard package.
_COMPRESSED: Dict[str, Callable[[str, str], Any]] = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
_PARQUET = (".parquet", ".pq")
_JSONL = (".jsonl", ".json", ".ndjson")


def _open_jsonl(path: str) -> Any:
    for suffix, opener in _COMPRESSED.items():
        if path.endswith(suffix):
            return opener(path, "rb")
    if path.endswith(".zst"):
        try:
            import zstandard  # type: ignore[import-not-found,import-untyped,unused-ignore]
        except ImportError as e:
            raise RuntimeError(f"{path}: reading .zst needs the zstandard package: pip install zstandard ({e})") \
                from None
        import io
        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True))
    return open(path, "rb")


def _lines(path: str) -> Iterator[bytes]:
    """The lines of a JSONL file, decompressed; a broken or truncated compressed stream is
    an error naming the file and the last whole line, never a silently short input."""
    number = 0
    with _open_jsonl(path) as f:
        try:
            for raw in f:
                number += 1
                yield raw
        except (OSError, EOFError, lzma.LZMAError) as e:
            raise ValueError(f"{path}: the compressed stream is broken after line {number} "
                             f"({type(e).__name__}: {e})") from None
        except Exception as e:  # zstandard's ZstdError is its own class
            if type(e).__name__ != "ZstdError":
                raise
            raise ValueError(f"{path}: the compressed stream is broken after line {number} ({e})") from None


def _jsonl_texts(path: str, field: str) -> Iterator[Union[str, BadRecord]]:
    for number, raw in enumerate(_lines(path), start=1):
        line = raw.rstrip(b"\r\n")
        if not line.strip():
            yield BadRecord(path, "line", number, "empty line")
            continue
        try:
            obj = json.loads(line)
        except (ValueError, UnicodeDecodeError) as e:
            yield BadRecord(path, "line", number, f"not JSON ({e})")
            continue
        if not isinstance(obj, dict):
            yield BadRecord(path, "line", number, f"not a JSON object ({type(obj).__name__})")
        elif field not in obj:
            yield BadRecord(path, "line", number, f"no field {field!r}")
        elif not isinstance(obj[field], str):
            yield BadRecord(path, "line", number, f"field {field!r} is {type(obj[field]).__name__}, not a string")
        else:
            yield obj[field]


def _is_remote(path: str) -> bool:
    return path.startswith(("s3://", "http://", "https://"))


class _RangedFile(io.RawIOBase):
    """A remote object as a seekable binary file, each read one ranged request
    through feedline's client (retries, timeouts, S3 signing): what pyarrow's
    Parquet reader is given for s3:// and http(s):// inputs."""

    def __init__(self, name: str) -> None:
        from . import _C
        self._f = _C.OpenedFile(name)
        self._pos = 0
        self.name = name

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._f.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, b: Any) -> int:
        data = self._f.pread(self._pos, len(b))
        b[:len(data)] = data
        self._pos += len(data)
        return len(data)


def _parquet_texts(path: str, field: str) -> Iterator[Union[str, BadRecord]]:
    try:
        import pyarrow.parquet as pq  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError as e:
        raise RuntimeError(f"{path}: reading Parquet needs pyarrow: pip install pyarrow ({e})") from None
    f = pq.ParquetFile(_RangedFile(path) if _is_remote(path) else path)
    if field not in f.schema_arrow.names:
        raise ValueError(f"{path}: no column {field!r} (columns: {', '.join(f.schema_arrow.names)})")
    row = 0
    for batch in f.iter_batches(columns=[field], batch_size=4096):
        for value in batch.column(0).to_pylist():
            row += 1
            if not isinstance(value, str):
                kind = "null" if value is None else type(value).__name__
                yield BadRecord(path, "row", row, f"column {field!r} is {kind}, not a string")
            else:
                yield value


def read_texts(path: str, field: str = "text") -> Iterator[Union[str, BadRecord]]:
    """The documents of a JSONL (one JSON object per line; .gz, .bz2, .xz or .zst
    compressed too) or Parquet file, in order; a record without text is yielded as a
    BadRecord in its place."""
    if path.endswith(_PARQUET):
        return _parquet_texts(path, field)
    return _jsonl_texts(path, field)


def input_files(inputs: Union[PathLike, Sequence[PathLike]]) -> List[str]:
    """The files `inputs` name, in order: a file as it is; a directory's JSONL (plain or
    compressed) and Parquet files, in name order. A directory holding none, or a path
    that does not exist, is an error naming it."""
    items = [inputs] if isinstance(inputs, (str, bytes, os.PathLike)) else list(inputs)
    if not items:
        raise ValueError("pack_text needs at least one input")
    files: List[str] = []
    for item in items:
        path = os.fsdecode(os.fspath(item))
        if _is_remote(path):
            if path.endswith(_PARQUET):
                files.append(path)
            elif path.startswith("s3://") and not _is_text_file(path.rsplit("/", 1)[-1]):
                from . import _C
                listed = _C.columnar_files(path)  # the prefix's .parquet objects, in key order
                if not all(f.endswith(_PARQUET) for f in listed):
                    raise ValueError(f"{path}: a prefix with no Parquet objects (JSONL is read from local disk)")
                files.extend(listed)
            else:
                raise ValueError(f"{path}: remote inputs are Parquet (.parquet); JSONL is read from local disk")
        elif os.path.isdir(path):
            names = sorted(n for n in os.listdir(path) if _is_text_file(n) and
                           os.path.isfile(os.path.join(path, n)))
            if not names:
                raise ValueError(f"{path}: a directory with no JSONL or Parquet files "
                                 f"({', '.join(_JSONL + _PARQUET)}, compressed JSONL: .gz, .bz2, .xz, .zst)")
            files.extend(os.path.join(path, n) for n in names)
        elif os.path.exists(path):
            files.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such file or directory")
    return files


def _is_text_file(name: str) -> bool:
    base = name
    for suffix in (*_COMPRESSED, ".zst"):
        if base.endswith(suffix):
            base = base[:-len(suffix)]
            break
    return base.endswith(_JSONL) or (base == name and name.endswith(_PARQUET))


def _all_texts(files: Sequence[str], field: str) -> Iterator[Union[str, BadRecord]]:
    for path in files:
        yield from read_texts(path, field)


def resolve_eos(tokenizer: Any, eos_token: Union[int, str, None]) -> Tuple[int, Optional[str]]:
    """The end-of-document id and its text: an id, a token name, or (None) the first of
    USUAL_EOS_TOKENS the tokenizer knows."""
    if eos_token is None:
        for name in USUAL_EOS_TOKENS:
            i = tokenizer.token_to_id(name)
            if i is not None:
                return int(i), name
        raise ValueError("the tokenizer has none of the usual end-of-document tokens "
                         f"({', '.join(USUAL_EOS_TOKENS)}): pass --eos-token ID or NAME")
    if isinstance(eos_token, int) or (isinstance(eos_token, str) and eos_token.isdigit()):
        i = int(eos_token)
        vocab = tokenizer.get_vocab_size(with_added_tokens=True)
        if not 0 <= i < vocab:
            raise ValueError(f"--eos-token {i} is outside the vocabulary [0, {vocab})")
        return i, tokenizer.id_to_token(i)
    found = tokenizer.token_to_id(eos_token)
    if found is None:
        raise ValueError(f"--eos-token {eos_token!r} is not a token of the tokenizer")
    return int(found), eos_token


def _chunks(texts: Iterator[Union[str, BadRecord]], size: int, skip_bad: bool,
            skipped: List[BadRecord]) -> Iterator[List[str]]:
    chunk: List[str] = []
    for t in texts:
        if isinstance(t, BadRecord):
            if not skip_bad:
                raise t
            skipped.append(t)
            continue
        chunk.append(t)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def pack_text(input: Union[PathLike, Sequence[PathLike]], output: PathLike, tokenizer: PathLike,
              field: str = "text",
              eos_token: Union[int, str, None] = None, num_threads: Optional[int] = None,
              shard_tokens: int = 1 << 28, batch_documents: int = 256, skip_bad: bool = False,
              progress: bool = True) -> Dict[str, Any]:
    """Tokenises every document of ``input`` (a JSONL file, plain or .gz/.bz2/.xz/.zst
    compressed, or a Parquet file by its .parquet suffix; a directory of them; or a list of
    those, written in order) with the tokenizer.json at ``tokenizer``, appends the
    end-of-document token and writes feedline token shards into the directory ``output``
    (refused if it already holds a manifest).

    A record that is not JSON, not an object, lacks ``field`` or holds no string raises
    BadRecord naming the file, line (row) and reason; with ``skip_bad`` it is skipped,
    counted and reported on stderr. Returns the manifest written, plus ``num_skipped`` and
    ``skipped`` (the first 100 bad records, as messages).

    An ``output`` of ``s3://bucket/prefix`` (docs/object_stores.md) is written to a local
    staging directory (``$TMPDIR``) and uploaded, the manifest last, then the staging removed;
    a prefix that already holds a manifest.json is refused before any tokenising."""
    out_name = os.fspath(output)
    if isinstance(out_name, str) and out_name.startswith("s3://"):
        return _pack_text_to_bucket(out_name, lambda staging: pack_text(
            input, staging, tokenizer, field=field, eos_token=eos_token, num_threads=num_threads,
            shard_tokens=shard_tokens, batch_documents=batch_documents, skip_bad=skip_bad, progress=progress))
    try:
        import tokenizers  # type: ignore[import-not-found,unused-ignore]
    except ImportError as e:
        raise RuntimeError(f"pack_text needs the Hugging Face tokenizers library: pip install tokenizers ({e})") \
            from None
    from . import _C

    files = input_files(input)
    src = files[0] if len(files) == 1 else f"{len(files)} input files"
    out, tok_path = os.fspath(output), os.fspath(tokenizer)
    threads = int(num_threads) if num_threads else (os.cpu_count() or 1)
    if threads < 1:
        raise ValueError(f"num_threads must be >= 1, got {num_threads}")
    # Our threads are the parallelism; the library's own pool would oversubscribe them
    # (it reads the variable on every batch).
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    with open(tok_path, "rb") as f:
        tok_bytes = f.read()
    tok = tokenizers.Tokenizer.from_str(tok_bytes.decode("utf-8"))
    eos_id, eos_text = resolve_eos(tok, eos_token)
    vocab_size = max(tok.get_vocab_size(with_added_tokens=True), eos_id + 1)
    texts = _all_texts(files, field)  # input_files checked they exist: a missing one fails before OUT is made
    tokenizer_info = {"file": os.path.basename(tok_path), "sha256": hashlib.sha256(tok_bytes).hexdigest(),
                      "eos_token": eos_id, "eos_token_text": eos_text, "add_special_tokens": False,
                      "library": f"tokenizers {getattr(tokenizers, '__version__', '?')}"}
    skipped: List[BadRecord] = []
    source_info: Dict[str, Any] = ({"file": os.path.basename(files[0]), "field": field} if len(files) == 1 else
                                   {"files": [os.path.basename(f) for f in files], "field": field})

    import numpy as np

    # encode_batch_fast (tokenizers >= 0.20): the same ids without the character offsets
    # encode_batch computes (a quarter of its time), GIL released like it.
    encode_batch = getattr(tok, "encode_batch_fast", tok.encode_batch)

    def encode(chunk: Sequence[str]) -> Tuple[Any, Any, int]:
        encs = encode_batch(list(chunk), add_special_tokens=False)
        per_doc = [e.ids for e in encs]  # each .ids builds a list: once
        lengths = np.fromiter((len(x) + 1 for x in per_doc), dtype=np.int64, count=len(per_doc))
        ids = np.empty(int(lengths.sum()), dtype=np.int64)
        at = 0
        for x in per_doc:
            n = len(x)
            ids[at:at + n] = x
            ids[at + n] = eos_id
            at += n + 1
        return ids, lengths, sum(len(t.encode("utf-8")) for t in chunk)

    # The writer is created after the first chunk is read, so that an input that fails at
    # once (bad first line, no such column) leaves no directory behind.
    writer: Optional[Any] = None
    start = time.monotonic()
    last_report = start
    text_bytes = 0

    def report(final: bool = False) -> None:
        if not progress or writer is None:
            return
        secs = max(time.monotonic() - start, 1e-9)
        print(f"pack-text: {writer.num_documents} documents, {writer.num_tokens} tokens, "
              f"{text_bytes / 1e6:.1f} MB text, {text_bytes / 1e6 / secs:.1f} MB/s"
              + (f", {len(skipped)} bad records skipped" if skipped else "") + ("\n" if final else ""),
              end="\r" if not final else "", file=sys.stderr, flush=True)

    def write(result: Tuple[Any, Any, int]) -> None:
        nonlocal writer, text_bytes, last_report
        if writer is None:
            writer = _C.TokenShardWriter(os.fsencode(out), vocab_size, int(shard_tokens),
                                         json.dumps(tokenizer_info), json.dumps(source_info))
        ids, lengths, nbytes = result
        writer.add_documents(ids, lengths)
        text_bytes += nbytes
        now = time.monotonic()
        if now - last_report >= 1.0:
            last_report = now
            report()

    chunks = _chunks(texts, max(1, int(batch_documents)), skip_bad, skipped)
    if threads == 1:
        for chunk in chunks:
            write(encode(chunk))
    else:
        # In order: futures are consumed in submission order, at most 2 per thread in flight.
        with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
            pending: List[concurrent.futures.Future[Tuple[Any, Any, int]]] = []
            for chunk in chunks:
                pending.append(pool.submit(encode, chunk))
                if len(pending) >= 2 * threads:
                    write(pending.pop(0).result())
            for fut in pending:
                write(fut.result())
    if writer is None:
        raise ValueError(f"{src}: no documents" + (f" ({len(skipped)} bad records skipped)" if skipped else ""))
    writer.finish()
    report(final=True)
    if skipped:
        first = skipped[0]
        print(f"pack-text: skipped {len(skipped)} bad records (first: {first})", file=sys.stderr)
    with open(os.path.join(out, "manifest.json"), encoding="utf-8") as mf:
        manifest: Dict[str, Any] = json.load(mf)
    manifest["skipped"] = [str(b) for b in skipped[:100]]
    manifest["num_skipped"] = len(skipped)
    return manifest


def _pack_text_to_bucket(url: str, pack: Any) -> Dict[str, Any]:
    """pack(staging_dir) into a temporary directory, then its files uploaded under url."""
    import shutil
    import tempfile

    from . import _C
    prefix = url if url.endswith("/") else url + "/"
    if any(key == prefix.split("/", 3)[-1] + "manifest.json" for key, _, _ in _C.list_objects(prefix)):
        raise FileExistsError(f"{prefix}manifest.json exists: the output already holds a dataset")
    staging = tempfile.mkdtemp(prefix="feedline-pack-text-")
    try:
        out = os.path.join(staging, "ds")
        manifest: Dict[str, Any] = pack(out)
        _C.upload_directory(out, prefix, "manifest.json")
        return manifest
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(
        prog="feedline pack-text", allow_abbrev=False,
        description="Tokenise JSONL or Parquet text into feedline token shards (docs/token_shards.md): "
                    "one document per line (row), the end-of-document token appended, written in input "
                    "order (identical output for any thread count), crash-safe (manifest last).")
    p.add_argument("input", nargs="+",
                   help="JSONL files (one JSON object per line; .gz, .bz2, .xz, .zst compressed too), .parquet "
                        "files, or directories of them (in name order); Parquet also as s3:// objects or "
                        "prefixes, or http(s):// URLs; written in the order given")
    p.add_argument("output", help="the dataset directory to write (must not hold a manifest.json), or an "
                                  "s3://bucket/prefix (staged locally, uploaded with the manifest last)")
    p.add_argument("--tokenizer", required=True, help="a Hugging Face tokenizer.json")
    p.add_argument("--field", default="text", help="the JSON field or Parquet column holding the text (text)")
    p.add_argument("--eos-token", default=None,
                   help="end-of-document token, an id or a name (default: the first of "
                        f"{', '.join(USUAL_EOS_TOKENS)} the tokenizer has)")
    p.add_argument("--threads", type=int, default=0, help="tokenising threads (0 = all cores)")
    p.add_argument("--shard-tokens", type=int, default=1 << 28, help="tokens per shard (2^28)")
    p.add_argument("--skip-bad", action="store_true",
                   help="skip records that are not JSON or lack the field, count and report them")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = list(sys.argv[1:] if argv is None else argv)
    # An unknown option is the error to report, before any missing argument.
    known = {o for action in p._actions for o in action.option_strings}
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("-") and arg != "-" and arg.split("=", 1)[0] not in known:
            p.error(f"unrecognized arguments: {arg}")
    a = p.parse_args(args)
    try:
        m = pack_text(a.input, a.output, a.tokenizer, field=a.field, eos_token=a.eos_token,
                      num_threads=a.threads or None, shard_tokens=a.shard_tokens, skip_bad=a.skip_bad,
                      progress=not a.quiet)
    except (BadRecord, ValueError, RuntimeError, OSError) as e:
        print(f"feedline pack-text: error: {e}", file=sys.stderr)
        return 1
    print(f"{a.output}: {m['documents']} documents, {m['tokens']} tokens ({m['dtype']}) "
          f"in {len(m['shards'])} shards")
    return 0


class _CallableModule(types.ModuleType):
    """``feedline.pack_text(...)`` calls the function whether that name is bound to it or,
    after ``import feedline.pack_text``, to this module."""

    def __call__(self, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        return pack_text(*args, **kwargs)


if __name__ == "__main__":
    sys.exit(main())
else:
    sys.modules[__name__].__class__ = _CallableModule
