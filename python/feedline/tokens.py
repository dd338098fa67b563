"""feedline.TokenLoader: training windows from pre-tokenised corpora (docs/tokens.md)."""
from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import torch

from . import _C
from .loader import Loader, Source

# One source or several, concatenated in order.
Sources = Union[Source, Sequence[Source]]


def cu_seqlens(document_ids: torch.Tensor) -> torch.Tensor:
    """Cumulative sequence starts over a flattened [batch, seq_len] batch, as
    flash-attn's varlen functions take them (int32, first 0, last
    batch * seq_len): every row starts a sequence, and so does every change
    of document id inside a row. The longest sequence is
    ``int(cu.diff().max())``."""
    if document_ids.dim() != 2:
        raise ValueError(f"document_ids must be [batch, seq_len], got shape {tuple(document_ids.shape)}")
    rows, seq_len = document_ids.shape
    starts = torch.ones_like(document_ids, dtype=torch.bool)
    if seq_len > 1:
        starts[:, 1:] = document_ids[:, 1:] != document_ids[:, :-1]
    idx = starts.reshape(-1).nonzero().reshape(-1)
    end = torch.tensor([rows * seq_len], dtype=idx.dtype, device=idx.device)
    return torch.cat([idx, end]).to(torch.int32)


def _paths(sources: Sources) -> List[str]:
    if isinstance(sources, (str, bytes, os.PathLike)):
        items: List[Any] = [sources]
    else:
        items = list(sources)
    if not items:
        raise ValueError("TokenLoader needs at least one source")
    return [os.path.expanduser(os.fsdecode(os.fspath(p))) for p in items]


class TokenLoader(Loader):
    """Windows of consecutive tokens for language-model training.

    Args:
        sources: a flat token file (nanoGPT's train.bin: raw ids, no header)
            or a Megatron-LM indexed dataset (its prefix, or the prefix's
            .bin, with the .idx beside it) or a feedline token-shard
            dataset (its directory or manifest.json: docs/token_shards.md,
            written by feedline.pack_text); or a list of them, concatenated
            in order (each starts a document).
        seq_len: tokens per training sequence. Window i holds tokens
            [i * seq_len, i * seq_len + seq_len + 1) of the concatenation, so
            every token after the first is a label once per epoch; the
            tokens after the last whole window (fewer than seq_len) are not
            used (``tail_tokens``).
        batch_size: windows per batch on this rank.
        dtype: of flat files, "uint16" (nanoGPT's, vocabularies < 65536) or
            "uint32"; Megatron datasets carry theirs in the index.
        eos_token: in flat files, the id that ends a document: positions
            and document ids restart after it. None: a flat file is one
            document. Megatron documents come from the index.
        shuffle, seed, drop_last, rank, world_size, num_threads,
        prefetch_batches, ram_budget, elastic: as for feedline.Loader; the
        order, sharding and resume are the engine's (docs/engine.md).

    Iterating yields dicts of tensors: ``input_ids``, ``labels``,
    ``position_ids``, ``document_ids`` (int64 [batch, seq_len]) and
    ``cu_seqlens`` (int32, flash-attn's varlen boundaries for this batch).
    """

    def __init__(self, sources: Sources, seq_len: int, batch_size: int, dtype: str = "uint16",
                 shuffle: bool = False, seed: int = 0, drop_last: bool = False, eos_token: Optional[int] = None,
                 rank: Optional[int] = None, world_size: Optional[int] = None,
                 num_threads: Union[int, str] = "auto", prefetch_batches: Union[int, str] = "auto",
                 ram_budget: Optional[int] = None, elastic: bool = False) -> None:
        if int(seq_len) < 1:
            raise ValueError(f"seq_len must be >= 1, got {seq_len}")
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if eos_token is not None and int(eos_token) < 0:
            raise ValueError(f"eos_token must be a token id >= 0 or None, got {eos_token}")
        paths = _paths(sources)
        corpus = _C.open_token_corpus([os.fsencode(p) for p in paths], dtype,
                                      None if eos_token is None else int(eos_token))
        pipeline = _C.token_window_pipeline(corpus, int(seq_len))
        super().__init__(paths[0], batch_size=int(batch_size), shuffle=shuffle, seed=seed, drop_last=drop_last,
                         num_threads=num_threads, prefetch_batches=prefetch_batches, ram_budget=ram_budget,
                         rank=rank, world_size=world_size, elastic=elastic, _pipeline=pipeline)
        self.sources = paths
        self.seq_len = int(seq_len)
        self.dtype = dtype
        self.eos_token = eos_token
        self._corpus = corpus

    @property
    def num_tokens(self) -> int:
        """Tokens in the concatenated sources."""
        return self._corpus.num_tokens

    @property
    def num_windows(self) -> int:
        """Windows (samples) per epoch, over all ranks."""
        return _C.num_token_windows(self._corpus.num_tokens, self.seq_len)

    @property
    def tail_tokens(self) -> int:
        """Tokens after the last whole window: never a label."""
        return _C.token_window_tail_tokens(self._corpus.num_tokens, self.seq_len)

    def __iter__(self) -> Iterator[Dict[str, torch.Tensor]]:
        for batch in self.batches():
            out = dict(batch.fields)
            del batch  # a suspended generator frame must not pin a buffer
            out["cu_seqlens"] = cu_seqlens(out["document_ids"])
            yield out
            del out

    def stats(self) -> Dict[str, Any]:
        """The engine's metrics, plus the corpus under "tokens"."""
        m = super().stats()
        m["tokens"] = {"num_tokens": self.num_tokens, "num_windows": self.num_windows,
                       "tail_tokens": self.tail_tokens, "seq_len": self.seq_len, "sources": self._corpus.sources}
        return m
