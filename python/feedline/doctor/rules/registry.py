"""The rule registry: which rules exist for each loader kind, in the order
they run, and the model each kind's rules share.

A rule is a function rule(ev, m) -> finding or None, where ev is the
evidence (the report's JSON form) and m the kind's model built from it;
@rule("torch") adds one to the torch DataLoader's list. Findings come out in
the order the rules ran, before rules.rank() orders them, so a kind's rules
are registered in the order they are defined in its module.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar

Ev = dict[str, Any]
Rule = Callable[[Ev, Any], Optional[dict[str, Any]]]
M = TypeVar("M", bound=type)

_rules: dict[str, list[Rule]] = {}
_models: dict[str, Callable[[Ev], Any]] = {}


def rule(kind: str) -> Callable[[Rule], Rule]:
    """Registers a rule for loader kind `kind` (after those already there)."""
    def register(fn: Rule) -> Rule:
        _rules.setdefault(kind, []).append(fn)
        return fn
    return register


def model(kind: str) -> Callable[[M], M]:
    """Registers the model class whose instance, made from the evidence,
    every rule of `kind` gets as its second argument."""
    def register(cls: M) -> M:
        if kind in _models:
            raise ValueError(f"loader kind {kind!r} already has a model ({_models[kind]})")
        _models[kind] = cls
        return cls
    return register


def rules_for(kind: str) -> list[Rule]:
    """The rules of `kind`, in the order they run."""
    return list(_rules.get(kind, []))


def model_for(kind: str) -> Optional[Callable[[Ev], Any]]:
    return _models.get(kind)


def run_rules(kind: str, ev: Ev) -> list[dict[str, Any]]:
    """The findings of every rule of `kind` on `ev`, in registration order."""
    make = _models.get(kind)
    if make is None:
        return []
    m = make(ev)
    findings = []
    for r in _rules.get(kind, []):
        f = r(ev, m)
        if f:
            findings.append(f)
    return findings
