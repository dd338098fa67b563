"""Writing a benchmark's results: NAME.json (the figures, for bench/summary.py
and the tests) and NAME.md (the table a person reads) side by side under
bench/results. Each file is replaced atomically (a temporary file beside it,
then a rename), so a reader, or a run killed half-way, never leaves a
half-written file."""
from __future__ import annotations

import json
import os
import pathlib
from typing import Any, List, Optional, Union

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"


def suffixed(name: str, quick: bool) -> str:
    """The results' base name: quick (smoke) runs write NAME-quick.*, which
    git ignores, so a smoke run never replaces committed figures."""
    return f"{name}-quick" if quick else name


def write_text(path: Union[str, "os.PathLike[str]"], text: str) -> None:
    """Writes text to path through a temporary file beside it and a rename."""
    path = pathlib.Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write(name: str, data: Any, text: str, out_dir: Union[str, "os.PathLike[str]", None] = None,
          quick: bool = False) -> List[pathlib.Path]:
    """Writes data as NAME.json (indented, a final newline) and text as
    NAME.md in out_dir (default bench/results, made if missing); returns the
    two paths, json first."""
    out = pathlib.Path(out_dir) if out_dir is not None else RESULTS
    out.mkdir(parents=True, exist_ok=True)
    base = suffixed(name, quick)
    js, md = out / f"{base}.json", out / f"{base}.md"
    write_text(js, json.dumps(data, indent=1) + "\n")
    write_text(md, text if text.endswith("\n") else text + "\n")
    return [js, md]


def load(name: str, quick: bool = False, out_dir: Optional[Union[str, "os.PathLike[str]"]] = None) -> Any:
    """NAME.json from out_dir (default bench/results) parsed, or None when
    that benchmark has not been run."""
    path = (pathlib.Path(out_dir) if out_dir is not None else RESULTS) / f"{suffixed(name, quick)}.json"
    if not path.exists():
        return None
    return json.loads(path.read_text())
