"""Token batches: what the doctor counts for a language-model loop.

A batch is a token batch when the doctor can tell without guessing:

- a dict with an ``input_ids`` tensor of integers shaped [batch, seq_len]
  (feedline.TokenLoader's batches, Hugging Face's convention);
- a pair (or longer tuple / list) whose first two items are integer tensors
  of the same [batch, seq_len] shape (nanoGPT's ``x, y`` from a memmap:
  inputs and their shifted targets).

Its tokens are that tensor's element count (padding included; a
TokenLoader's padding share is reported beside). Anything else has no
tokens and the report has no "tokens" section. Counting reads shapes only:
no tensor is touched, so a batch on a device costs no sync.
"""
from __future__ import annotations

from typing import Any, Optional

from .evidence import TokenEvidence, TokenLoaderStats, TokenSource, steady_mask

_INT_DTYPES: Optional[frozenset[Any]] = None


def _is_token_tensor(t: Any) -> bool:
    global _INT_DTYPES
    try:
        import torch
    except ImportError:
        return False
    if _INT_DTYPES is None:
        _INT_DTYPES = frozenset({torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8})
    return isinstance(t, torch.Tensor) and t.dim() == 2 and t.dtype in _INT_DTYPES


def token_field(batch: Any) -> Optional[tuple[str, Any]]:
    """(the field's name, the tensor) of a token batch, or None."""
    if isinstance(batch, dict):
        t = batch.get("input_ids")
        return ("input_ids", t) if _is_token_tensor(t) else None
    if isinstance(batch, (tuple, list)) and len(batch) >= 2:
        x, y = batch[0], batch[1]
        if _is_token_tensor(x) and _is_token_tensor(y) and tuple(x.shape) == tuple(y.shape):
            return "x", x
    return None


def count_tokens(batch: Any) -> int:
    """Tokens in a token batch (0 for any other batch)."""
    f = token_field(batch)
    return int(f[1].numel()) if f is not None else 0


def is_token_loader(obj: Any) -> bool:
    try:
        from ..tokens import TokenLoader
    except ImportError:
        return False
    return isinstance(obj, TokenLoader)


def _source(p: Any) -> TokenSource:
    if isinstance(p, dict):
        return TokenSource(path=str(p.get("path")), kind=str(p.get("kind")), num_tokens=int(p.get("num_tokens") or 0))
    return TokenSource(path=str(p), kind="unknown", num_tokens=0)


def loader_stats(loader: Any) -> Optional[TokenLoaderStats]:
    """A feedline.TokenLoader's own figures (its plan and sources: known
    without the engine, so also after close()); None for any other loader."""
    if not is_token_loader(loader):
        return None
    s = TokenLoaderStats(packing=loader.packing, seq_len=loader.seq_len, num_tokens=int(loader.num_tokens),
                         num_windows=int(loader.num_windows), tail_tokens=int(loader.tail_tokens),
                         padding_share=float(loader.padding_share),
                         sources=[_source(p) for c in loader._corpora for p in c.sources])
    if loader.weights is not None:
        s.weights = [float(w) for w in loader._segment[2]]
    return s


def section(doctor: Any, skip: int) -> Optional[TokenEvidence]:
    """The report's "tokens" section, or None when no batch had tokens.
    Rates are over the loop's windows (loop.samples_per_s and
    loop.steady_samples_per_s): tokens over the same wall time."""
    first = doctor.token_field
    steps = doctor.steps
    tokens = sum(s.tokens for s in steps)
    if first is None or not tokens:
        return None
    name, seq_len = first
    wall = sum(s.wait_s + s.step_s for s in steps)
    mask = steady_mask([s.epoch for s in steps], skip)
    steady = [s for s, keep in zip(steps, mask) if keep]
    st_wall = sum(s.wait_s + s.step_s for s in steady)
    samples = sum(s.samples for s in steps)
    ev = TokenEvidence(field=name, seq_len=seq_len, tokens=tokens,
                       tokens_per_sample=tokens / samples if samples else None,
                       tokens_per_s=tokens / wall if wall > 0 else 0.0,
                       steady_tokens_per_s=sum(s.tokens for s in steady) / st_wall if st_wall > 0 else None,
                       loader=loader_stats(doctor.iterable))
    if ev.loader is not None and ev.loader.padding_share:
        rate = ev.steady_tokens_per_s if ev.steady_tokens_per_s is not None else ev.tokens_per_s
        ev.real_tokens_per_s = rate * (1.0 - ev.loader.padding_share)
    return ev
