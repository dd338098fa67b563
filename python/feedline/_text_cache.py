"""Text corpora for TokenLoader (docs/columnar.md, "Text corpora"): JSONL
and Parquet sources (local, or Parquet in a bucket) tokenised once by
feedline.pack_text into token shards in a cache folder, keyed by what the
tokens depend on, and read from there on every later run.

The key hashes the tokenizer file's bytes, the text field, the eos token,
and each input file's name with its size and modification time (local) or
its size and ETag (s3://): another tokenizer, another corpus or a changed
file is another cache entry, never a stale one. Packing writes a staging
folder and renames it into place (the first finished wins), so concurrent
processes never see half a dataset; under torch.distributed rank 0 packs
while the others wait at a barrier (and pack themselves if the cache is not
shared with rank 0)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from typing import Any, List, Optional, Union

PathLike = Union[str, "os.PathLike[str]"]

_TEXT_SUFFIXES = (".parquet", ".pq", ".jsonl", ".json", ".ndjson", ".jsonl.gz", ".jsonl.bz2", ".jsonl.xz",
                  ".jsonl.zst")


def is_text_source(path: str, tokenizer_given: bool = False) -> bool:
    """True for what pack_text reads: a JSONL or Parquet file, a folder of them; with a
    tokenizer, also an s3:// prefix (of Parquet: without one, a prefix is a token dataset)."""
    if path.endswith(_TEXT_SUFFIXES):
        return True
    if path.startswith("s3://"):
        return tokenizer_given and not path.endswith((".bin", ".idx", ".flt", "manifest.json"))
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "manifest.json")):
        return any(n.endswith(_TEXT_SUFFIXES) for n in os.listdir(path))
    return False


def _describe(files: List[str]) -> List[Any]:
    from . import _C
    out: List[Any] = []
    for f in files:
        if f.startswith("s3://"):
            key = f.split("/", 3)[3] if f.count("/") >= 3 else ""
            listed = [(size, etag) for k, size, etag in _C.list_objects(f) if k == key]
            out.append([f, *(listed[0] if listed else ("?", "?"))])
        elif f.startswith(("http://", "https://")):
            out.append([f, _C.OpenedFile(f).size])
        else:
            st = os.stat(f)
            out.append([os.path.abspath(f), st.st_size, st.st_mtime_ns])
    return out


def cache_root() -> str:
    root = os.environ.get("FEEDLINE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "feedline")
    return os.path.join(root, "tokens")


def packed(source: str, tokenizer: PathLike, field: str, eos_token: Optional[int],
           cache_dir: Optional[PathLike] = None) -> str:
    """The token-shard folder holding `source` tokenised (packed now if it is not cached)."""
    from .pack_text import input_files
    files = input_files(source)
    with open(os.fspath(tokenizer), "rb") as f:
        tok_bytes = f.read()
    key_text = json.dumps({"format": 1, "tokenizer": hashlib.sha256(tok_bytes).hexdigest(), "field": field,
                           "eos": eos_token, "files": _describe(files)}, sort_keys=True)
    key = hashlib.sha256(key_text.encode()).hexdigest()[:24]
    root = os.fspath(cache_dir) if cache_dir is not None else cache_root()
    out = os.path.join(root, key)
    if os.path.exists(os.path.join(out, "manifest.json")):
        return out
    dist = None
    try:
        import torch.distributed as dist_mod
        if dist_mod.is_available() and dist_mod.is_initialized() and dist_mod.get_world_size() > 1:
            dist = dist_mod
    except ImportError:
        pass
    if dist is None or dist.get_rank() == 0:
        _pack_into(out, files, tokenizer, field, eos_token, key_text)
    if dist is not None:
        dist.barrier()
        if not os.path.exists(os.path.join(out, "manifest.json")):  # a cache not shared with rank 0
            _pack_into(out, files, tokenizer, field, eos_token, key_text)
    return out


def _pack_into(out: str, files: List[str], tokenizer: PathLike, field: str, eos_token: Optional[int],
               key_text: str) -> None:
    from .pack_text import pack_text
    os.makedirs(os.path.dirname(out), exist_ok=True)
    staging = f"{out}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        pack_text(files, staging, tokenizer, field=field, eos_token=eos_token, progress=False)
        with open(os.path.join(staging, "cache-key.json"), "w", encoding="utf-8") as f:
            f.write(key_text + "\n")
        try:
            os.rename(staging, out)
        except OSError:
            if not os.path.exists(os.path.join(out, "manifest.json")):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
