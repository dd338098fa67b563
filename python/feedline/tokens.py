"""feedline.TokenLoader: training windows from pre-tokenised corpora (docs/tokens.md)."""
from __future__ import annotations

import os
import struct
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch

from . import _C, _text_cache
from .loader import Device, Loader, Source, _distributed_rank_world

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
    return [os.fsdecode(os.fspath(p)) if str(os.fsdecode(os.fspath(p))).startswith(("s3://", "http://", "https://"))
            else os.path.expanduser(os.fsdecode(os.fspath(p))) for p in items]


PACKINGS = ("concat", "best_fit")
TOKEN_FIELDS = ("input_ids", "labels", "position_ids", "document_ids", "cu_seqlens")  # TokenLoader(fields=)


class TokenLoader(Loader):
    """Training sequences from pre-tokenised corpora, for language models.

    Args:
        sources: a flat token file (nanoGPT's train.bin: raw ids, no header)
            or a Megatron-LM indexed dataset (its prefix, or the prefix's
            .bin, with the .idx beside it) or a feedline token-shard
            dataset (its directory or manifest.json: docs/token_shards.md,
            written by feedline.pack_text); or a list of them, concatenated
            in order (each starts a document). With ``weights``, a list of
            sources of a mixture, each a path or a list of paths
            (concatenated into that source's corpus).
        seq_len: tokens per training sequence.
        batch_size: sequences per batch on this rank.
        dtype: of flat files, "uint16" (nanoGPT's, vocabularies < 65536) or
            "uint32"; Megatron datasets carry theirs in the index.
        eos_token: in flat files, the id that ends a document: positions
            and document ids restart after it. None: a flat file is one
            document. Megatron documents come from the index.
        packing: "concat" (default): sequence i is the window of tokens
            [i * seq_len, i * seq_len + seq_len + 1) of the concatenation, so
            every token after the first is a label once per epoch; the
            tokens after the last whole window (fewer than seq_len) are not
            used (``tail_tokens``). "best_fit": documents up to seq_len are
            never split (longer ones are cut into seq_len pieces); each
            sequence is filled best-fit from a plan made at start from the
            document index, the rest is ``pad_token``; labels are -100 at
            padding and at each document's last token, position_ids restart
            per document, document_ids are -1 at padding
            (``padding_share``). docs/tokens.md, "Best fit".
        pad_token: the id padding best-fit sequences (required there).
        weights: one weight per source: a mixture. Every global batch
            (batch_size * world_size sequences) holds each source's share
            within one sequence of its weight, by a deterministic schedule
            over the global sample index; a source that runs out starts its
            next epoch in a new order. An epoch of a mixture is the sources'
            sequences summed, rounded down to whole global batches
            (drop_last has no effect). A loader made with other weights
            than a state's continues that state with its own weights from the
            resumed batch on. docs/tokens.md, "Mixtures". None: the sources
            are concatenated.
        shuffle, seed, drop_last, rank, world_size, num_threads,
        prefetch_batches, ram_budget, elastic: as for feedline.Loader; the
        order, sharding and resume are the engine's (docs/engine.md).
        device: as for feedline.Loader (the same device path): None keeps
            batches in host memory; a CUDA device gets every tensor of the
            dict there (cu_seqlens too, joined on the host before the copy),
            copied on a side stream one batch ahead from the pinned ring.
        fields: the keys of the dicts, a subset of ``TOKEN_FIELDS`` that
            holds "input_ids" and "labels"; None: all of them. A field left
            out is never computed: each costs seq_len * 8 bytes per sequence
            of memory and memory traffic (cu_seqlens: 4), so a model without
            per-document attention loads faster with
            ``fields=("input_ids", "labels")``. ``token_fields`` says which.
        mask_cross_document_labels: with concat packing, -100 (the loss's
            ignore_index) in ``labels`` wherever the next token starts
            another document, i.e. after each eos token and at each source
            boundary, so no loss is taken across documents (Megatron-LM's
            eod_mask_loss). False (default): that token is the label, as
            in nanoGPT. Best fit never labels across documents. It changes
            no sequence's place: a state resumes with either setting.
        tokenizer: a Hugging Face tokenizer.json for sources that are text:
            JSONL or Parquet files, folders of them, Parquet under an s3://
            prefix (FineWeb's layout). Each is tokenised once by
            feedline.pack_text (the end-of-document token appended,
            document boundaries kept) into token shards in ``cache_dir``
            (default ``~/.cache/feedline/tokens``), keyed by the tokenizer,
            the field and each file's size and date (or ETag), and read
            from there later. ``text_field``: the JSON field or column.
        endpoint_url, s3_anonymous: for sources that are s3:// objects
            (docs/object_stores.md): flat token files are read by ranged
            requests through a block cache instead of a memory map, with
            the local file's fingerprint (a state resumes across the copy).

    Iterating yields dicts of tensors: ``input_ids``, ``labels``,
    ``position_ids``, ``document_ids`` (int64 [batch, seq_len]) and
    ``cu_seqlens`` (int32, flash-attn's varlen boundaries for this batch,
    equal to ``feedline.tokens.cu_seqlens(document_ids)``). The workers
    write each row's segment starts (``document_starts`` int32 [batch,
    seq_len] and ``num_documents`` int32 [batch], fields of ``batches()``);
    iterating joins them in C++.
    """

    def __init__(self, sources: Union[Sources, Sequence[Sources]], seq_len: int, batch_size: int,
                 dtype: str = "uint16", shuffle: bool = False, seed: int = 0, drop_last: bool = False,
                 eos_token: Optional[int] = None, packing: str = "concat", pad_token: Optional[int] = None,
                 weights: Optional[Sequence[float]] = None,
                 rank: Optional[int] = None, world_size: Optional[int] = None,
                 num_threads: Union[int, str] = "auto", prefetch_batches: Union[int, str] = "auto",
                 ram_budget: Optional[int] = None, elastic: bool = False, device: Device = None,
                 fields: Optional[Sequence[str]] = None, mask_cross_document_labels: bool = False,
                 endpoint_url: Optional[str] = None, s3_anonymous: bool = False,
                 tokenizer: Optional[Union[str, "os.PathLike[str]"]] = None, text_field: str = "text",
                 cache_dir: Optional[Union[str, "os.PathLike[str]"]] = None) -> None:
        wanted = TOKEN_FIELDS if fields is None else tuple(fields)
        unknown = [f for f in wanted if f not in TOKEN_FIELDS]
        if unknown or "input_ids" not in wanted or "labels" not in wanted:
            raise ValueError(f"fields must be a subset of {TOKEN_FIELDS} holding 'input_ids' and 'labels', "
                             f"got {tuple(wanted)}" + (f" (unknown: {unknown})" if unknown else ""))
        self.token_fields = tuple(f for f in TOKEN_FIELDS if f in wanted)
        field_set = {"position_ids": "position_ids" in wanted, "document_ids": "document_ids" in wanted,
                     "document_starts": "cu_seqlens" in wanted}
        if int(seq_len) < 1:
            raise ValueError(f"seq_len must be >= 1, got {seq_len}")
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if eos_token is not None and int(eos_token) < 0:
            raise ValueError(f"eos_token must be a token id >= 0 or None, got {eos_token}")
        if packing not in PACKINGS:
            raise ValueError(f"packing must be one of {PACKINGS}, got {packing!r}")
        if packing == "best_fit" and (pad_token is None or int(pad_token) < 0):
            raise ValueError(f'packing="best_fit" needs pad_token, a token id >= 0, got {pad_token}')
        if rank is None or world_size is None:
            r, w = _distributed_rank_world()
            rank = r if rank is None else rank
            world_size = w if world_size is None else world_size
        self.seq_len = int(seq_len)
        self.dtype = dtype
        self.eos_token = eos_token
        self.packing = packing
        self.mask_cross_document_labels = bool(mask_cross_document_labels)
        self.pad_token = None if pad_token is None else int(pad_token)
        if weights is None:
            groups = [_paths(sources)]  # type: ignore[arg-type]
        else:
            if isinstance(sources, (str, bytes, os.PathLike)):
                raise ValueError("weights need a list of sources, one per weight")
            items = list(sources)
            if len(items) != len(weights):
                raise ValueError(f"{len(items)} sources but {len(weights)} weights")
            groups = [_paths(item) for item in items]
        # Text (JSONL, Parquet: FineWeb's layout) is tokenised once into the cache (_text_cache).
        texts = [p for g in groups for p in g if _text_cache.is_text_source(p)]
        if texts and tokenizer is None:
            raise ValueError(f"{texts[0]} is text (JSONL or Parquet): pass tokenizer= (a tokenizer.json) to "
                             f"tokenise it once into token shards (feedline.pack_text), or pack it yourself")
        if tokenizer is not None:
            if endpoint_url is not None:
                os.environ.setdefault("AWS_ENDPOINT_URL", str(endpoint_url))
            groups = [[_text_cache.packed(p, tokenizer, text_field, eos_token, cache_dir)
                       if _text_cache.is_text_source(p, True) else p for p in g] for g in groups]
        self.weights: Optional[List[float]] = None if weights is None else [float(w) for w in weights]
        if self.weights is not None and (any(not w >= 0 for w in self.weights) or sum(self.weights) <= 0):
            raise ValueError(f"weights must be >= 0 with a positive sum, got {self.weights}")
        eos = None if eos_token is None else int(eos_token)
        http = _C.HttpOptions()
        if endpoint_url is not None:
            http.s3.endpoint_url = str(endpoint_url)
        http.s3.anonymous = bool(s3_anonymous)
        self._corpora = [_C.open_token_corpus([os.fsencode(p) for p in g], dtype, eos, http) for g in groups]
        self._plans = [_C.best_fit_plan(c, self.seq_len) for c in self._corpora] if packing == "best_fit" else []
        if packing == "best_fit":
            pad = int(pad_token)  # type: ignore[arg-type]  # checked above
            self._pipelines = [_C.token_best_fit_pipeline(c, p, pad, **field_set)
                               for c, p in zip(self._corpora, self._plans)]
        else:
            self._pipelines = [_C.token_window_pipeline(c, self.seq_len, **field_set,
                                                        mask_cross_document_labels=self.mask_cross_document_labels)
                               for c in self._corpora]
        self._corpus = self._corpora[0]
        self.sources = groups[0] if self.weights is None else groups
        self.shuffle = shuffle
        self.seed = seed
        engine_shuffle, engine_drop_last = shuffle, drop_last
        if self.weights is None:
            pipeline = self._pipelines[0]
        else:
            # The mixture orders each source itself; the engine walks the
            # global index in order.
            self._window = int(batch_size) * int(world_size)
            total = sum(p.num_samples for p in self._pipelines)
            self._mixture_samples = max(1, total // self._window) * self._window
            self._segment: Tuple[int, List[int], List[float]] = (0, [0] * len(groups), self.weights)
            pipeline = self._mixture_pipeline()
            engine_shuffle, engine_drop_last = False, False
        super().__init__(groups[0][0], batch_size=int(batch_size), shuffle=engine_shuffle, seed=seed,
                         drop_last=engine_drop_last, num_threads=num_threads, prefetch_batches=prefetch_batches,
                         ram_budget=ram_budget, rank=rank, world_size=world_size, elastic=elastic,
                         device=device, _pipeline=pipeline)

    def _mixture_pipeline(self) -> Any:
        start, counts, weights = self._segment
        return _C.token_mixture_pipeline(self._pipelines, weights, self._window, self._mixture_samples,
                                         bool(self.shuffle), int(self.seed), start, counts)

    @property
    def num_tokens(self) -> int:
        """Tokens in the concatenated sources (of a mixture: all of them)."""
        return sum(c.num_tokens for c in self._corpora)

    @property
    def num_windows(self) -> int:
        """Sequences (samples) per epoch, over all ranks: windows (concat),
        planned sequences (best_fit), or a mixture's epoch."""
        if self.weights is not None:
            return self._mixture_samples
        return int(self._pipelines[0].num_samples)

    @property
    def tail_tokens(self) -> int:
        """Tokens after the last whole window: never a label (concat; 0 for best_fit)."""
        if self.packing == "best_fit":
            return 0
        return sum(_C.token_window_tail_tokens(c.num_tokens, self.seq_len) for c in self._corpora)

    @property
    def padding_share(self) -> float:
        """Pad tokens / tokens of all sequences of an epoch of each source
        (best_fit; concat pads nothing: 0.0)."""
        if not self._plans:
            return 0.0
        pad = sum(p.padding_tokens for p in self._plans)
        return pad / sum(p.num_sequences * self.seq_len for p in self._plans)

    def __iter__(self) -> Iterator[Dict[str, torch.Tensor]]:
        """One epoch of dicts (on `device` when set). The workers wrote each
        row's segment starts; the engine's next() joins them into cu_seqlens
        in C++, before any device copy (one pass over the starts, not over
        the tokens)."""
        return self._device_dicts() if self._feeder is not None else self._host_dicts()

    def _device_dicts(self) -> Iterator[Dict[str, torch.Tensor]]:
        for batch in self._on_device(self._host_batches(with_buffer=True, cu_seqlens=True)):
            out = batch.fields
            del batch  # a suspended generator frame must not pin a buffer
            yield out
            del out

    def _host_dicts(self) -> Iterator[Dict[str, torch.Tensor]]:
        # The host loop, lean per batch (a few microseconds of Python a
        # batch count at these rates): the engine hands (names, arrays,
        # index) with the names made once, and each dict is built in C
        # (zip, map), with no Batch object in between. batches() and the
        # device path keep Loader's Batch loop.
        number = self._begin_pass()
        try:
            yield from self._host_dict_pass(number)
        finally:
            self._end_pass(number)

    def _host_dict_pass(self, number: int) -> Iterator[Dict[str, torch.Tensor]]:
        next_arrays = self._loader.next_arrays
        from_numpy = torch.from_numpy
        while True:
            if self._pass_number != number:
                self._check_pass(number)
            r = next_arrays()
            if r is None:
                self._mid_epoch = False
                return
            self._mid_epoch = True
            names, arrays, self._last_index = r
            out = dict(zip(names, map(from_numpy, arrays)))
            del r, arrays  # a suspended generator frame must not pin a buffer
            yield out
            del out

    # -- resume: a mixture's schedule segment travels with the position ----
    def _fingerprints(self) -> List[int]:
        return [int(c.fingerprint) for c in self._corpora]

    def _position(self, blob: bytes) -> int:
        """The global sample index a state resumes at (docs/engine.md, "Resume")."""
        batch_size, world_size, epoch, next_batch = struct.unpack_from("<4Q", blob, 24)
        return int(epoch * self._mixture_samples + next_batch * batch_size * world_size)

    def state_dict(self) -> Dict[str, Any]:
        state = super().state_dict()
        if self.weights is not None:
            start, counts, weights = self._segment
            state["mixture"] = {"fingerprints": self._fingerprints(), "start": start, "counts": list(counts),
                                "weights": list(weights)}
        return state

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continues from `state`. A mixture state is refused on other
        sources (their fingerprints); made with other weights than this
        loader's, the schedule continues from the state's position with this
        loader's weights (the counts each source reached there carry over)."""
        mix = state.get("mixture") if isinstance(state, dict) else None
        if self.weights is None:
            if mix is not None:
                raise ValueError("a token mixture's state, and this TokenLoader has no weights")
            super().load_state_dict(state)
            return
        if mix is None:
            raise ValueError("not a token mixture's state (no 'mixture' entry), and this TokenLoader has weights")
        if list(mix["fingerprints"]) != self._fingerprints():
            raise ValueError(f"the state is of other token sources: fingerprints {list(mix['fingerprints'])}, "
                             f"these sources {self._fingerprints()}")
        saved = (int(mix["start"]), [int(c) for c in mix["counts"]], [float(w) for w in mix["weights"]])
        if saved[2] == self.weights:
            segment = saved
        else:
            position = self._position(state["sampler"])
            counts = _C.token_mixture_counts([p.num_samples for p in self._pipelines], saved[2], self._window,
                                             self._mixture_samples, saved[0], saved[1], position)
            segment = (position, list(counts), self.weights)
        if segment != self._segment:
            old = self._segment
            self._segment = segment
            try:
                pipeline = self._mixture_pipeline()
            except Exception:
                self._segment = old
                raise
            if not self._loader.closed:
                self._loader.close()
            self._loader = _C.Loader(pipeline, self._options)
        super().load_state_dict(state)

    def stats(self) -> Dict[str, Any]:
        """The engine's metrics, plus the corpus under "tokens"."""
        m = super().stats()
        m["tokens"] = {"num_tokens": self.num_tokens, "num_windows": self.num_windows,
                       "tail_tokens": self.tail_tokens, "seq_len": self.seq_len, "packing": self.packing,
                       "mask_cross_document_labels": self.mask_cross_document_labels,
                       "padding_share": self.padding_share,
                       "sources": [s for c in self._corpora for s in c.sources]}
        if self.weights is not None:
            m["tokens"]["weights"] = list(self._segment[2])
        return m
