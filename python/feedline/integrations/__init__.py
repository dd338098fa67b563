"""feedline inside the trainer frameworks (docs/integrations.md).

    feedline.integrations.lightning     DoctorCallback (a Lightning Callback)
    feedline.integrations.hf            FeedlineTrainer (transformers.Trainer), DoctorCallback
    feedline.integrations.torchtitan    TokenDataLoader (a torchtitan BaseDataLoader)
    feedline.integrations.ray           FeedlineMapper (Ray Data), loader state in Ray Train checkpoints

Lightning, Fabric and Accelerate need no adapter to load: a feedline.Loader
is what they expect of a loader as it is (the page says why); the modules
here are imported only by those who use the framework, which each imports.
"""
from __future__ import annotations

import base64
import inspect
import json
import os
from typing import Any, Callable, Optional

from ..doctor.evidence import LoopSite


def loop_site(framework: str, module: str, loop: str, step: Optional[Callable[..., Any]] = None) -> LoopSite:
    """The framework's loop and the user's step function, for the doctor's
    report: the step's qualified name and where it is defined (relative to
    the working directory when under it)."""
    version = None
    try:
        from importlib.metadata import version as _version
        version = _version(module)
    except Exception:  # noqa: BLE001 - the version only labels the report
        pass
    name = file = line = None
    if step is not None:
        fn = inspect.unwrap(getattr(step, "__func__", step))
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
        try:
            file = inspect.getsourcefile(fn)
            line = inspect.getsourcelines(fn)[1]
        except (OSError, TypeError):
            file = line = None
        if file is not None:
            rel = os.path.relpath(file)
            file = rel if not rel.startswith("..") else file
    return LoopSite(framework=framework, version=version, loop=loop, step=name, file=file, line=line)


STATE_FILE = "feedline_loader.json"


def save_state(state: dict[str, Any], path: str) -> None:
    """A loader's state_dict() as JSON (its engine state in base64), written
    whole or not at all."""
    out = {k: {"base64": base64.b64encode(v).decode()} if isinstance(v, bytes) else v for k, v in state.items()}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f)
    os.replace(tmp, path)


def load_state(path: str) -> dict[str, Any]:
    """The state save_state() wrote."""
    with open(path) as f:
        data = json.load(f)
    return {k: base64.b64decode(v["base64"]) if isinstance(v, dict) and set(v) == {"base64"} else v
            for k, v in data.items()}
