"""bench/e2e/augment_bench.py: both loaders of each recipe run and give the
same shapes (images at the recipe's size, soft labels where MixUp/CutMix
mix), so the benchmark compares like with like. torchvision v2's MixUp and
CutMix (>= 0.16) run under make test-torch2; Debian's 0.14 skips."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "e2e" / "augment_bench.py"
FEEDLINE = os.environ.get("FEEDLINE_BIN", str(ROOT / "build" / "tools" / "feedline"))

try:
    from torchvision.transforms.v2 import CutMix, MixUp  # noqa: F401
except ImportError:
    pytest.skip("the recipes need torchvision.transforms.v2.MixUp (torchvision >= 0.16)", allow_module_level=True)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("augment") / "data"
    subprocess.run([FEEDLINE, "gen-dataset", str(path), "--images", "60", "--classes", "10"], check=True,
                   stdout=subprocess.DEVNULL)
    return path


@pytest.mark.parametrize("recipe,size,soft", [("resnet50-new", 176, True), ("timm-like", 224, False)])
def test_both_loaders_of_a_recipe_run_and_agree_on_shapes(folder, recipe, size, soft):
    outs = {}
    for kind in ("feedline", "torch"):
        p = subprocess.run([sys.executable, str(SCRIPT), "--worker", f"{kind}/{recipe}", "--data", str(folder),
                            "--batch", "8", "--batches", "2", "--warmup", "1", "--cores", "2"],
                           capture_output=True, text=True, timeout=600, env=dict(os.environ))
        assert p.returncode == 0, p.stderr[-3000:]
        outs[kind] = json.loads(p.stdout.strip().splitlines()[-1])
    for out in outs.values():
        assert out["shape"] == [8, 3, size, size]
        assert out["labels_shape"] == ([8, 10] if soft else [8])
        assert out["samples"] == 16 and out["samples_per_s"] > 0
    assert "decode_transform" in " ".join(outs["feedline"]["ops"])  # the Compose ran natively (strict=True)
