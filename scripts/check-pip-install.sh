#!/usr/bin/env bash
# A new user's install, as the README shows it: `pip install .` into a fresh
# virtual environment of the python3 on PATH (build isolation, dependencies
# from PyPI: torch comes within pyproject.toml's range), then the installed
# package, imported from outside the source tree, loads a small generated
# ImageFolder. The venv (~5.5 GB with torch) is removed afterwards unless
# KEEP_VENV=1. Used by `make test-pip-install` (CI).
#   HOST_PYTHON   the interpreter to make the venv with (python3)
#   FEEDLINE_BIN  a built CLI, only to generate the data (build/tools/feedline)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${HOST_PYTHON:-python3}
CLI=${FEEDLINE_BIN:-$ROOT/build/tools/feedline}
VENV=$ROOT/build/venv-pip
DATA=$ROOT/build/pip-install-data

rm -rf "$VENV" "$DATA"
"$PY" -m venv "$VENV"
echo "check-pip-install: pip install . into $VENV ($("$VENV/bin/python" --version))"
"$VENV/bin/pip" install -q "$ROOT"
"$CLI" gen-dataset "$DATA" --images 24 --classes 3 --photos "$ROOT/tests/data/photos" >/dev/null

cd "$ROOT/build"  # not the source tree: the installed package must be the one imported
"$VENV/bin/python" - "$DATA" "$VENV" <<'PY'
import pathlib, sys
import torch
import feedline
data, venv = sys.argv[1], pathlib.Path(sys.argv[2]).resolve()
where = pathlib.Path(feedline.__file__).resolve()
assert venv in where.parents, f"feedline imported from {where}, not from the venv {venv}"
loader = feedline.Loader(data, batch_size=8, transform=feedline.transforms.imagenet_eval(224),
                         num_threads=1, shuffle=False)
labels = []
for images, y in loader:
    assert tuple(images.shape) == (8, 3, 224, 224) and images.dtype == torch.float32, (images.shape, images.dtype)
    assert torch.isfinite(images).all()
    labels += y.tolist()
assert sorted(labels) == sorted(label for _, label in loader.samples), labels
# The same images as Parquet: Arrow C++ found beside feedline (the pyarrow dependency).
import pyarrow as pa, pyarrow.parquet as pq
rows = [(p.read_bytes(), i) for i, c in enumerate(loader.classes) for p in sorted((pathlib.Path(data) / c).iterdir())]
pq.write_table(pa.table({"image": [b for b, _ in rows], "label": [y for _, y in rows]}), f"{data}/train.parquet")
pq_labels = [int(y) for _, ys in feedline.Loader(f"{data}/train.parquet", batch_size=8, num_threads=1,
                                                 transform=feedline.transforms.imagenet_eval(224)) for y in ys]
assert pq_labels == labels, (pq_labels, labels)
print(f"check-pip-install: ok: feedline from {where.parent}, torch {torch.__version__}, pyarrow {pa.__version__}, "
      f"{len(labels)} images in {len(loader.classes)} classes, from files and from Parquet")
PY
cd "$ROOT"
[ "${KEEP_VENV:-0}" = 1 ] || rm -rf "$VENV"
rm -rf "$DATA"
