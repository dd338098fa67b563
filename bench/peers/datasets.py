"""The two generated datasets of `make bench-peers`, made at set-up under
build/peers/data (never committed):

  small  `feedline gen-dataset` with `make bench`'s arguments (10 classes,
         seed 0): ImageNet-like, long side 300-500 px, 10% grayscale, 5% PNG;
  large  1-4 megapixel JPEGs (a uniform draw of the pixel count, the same
         aspect ratios and 3-in-4 landscape as gen-dataset), each a random
         crop of one of tests/data/photos upscaled with Lanczos, with a
         little Gaussian noise so that the entropy-coded data is
         photograph-like rather than smooth, tinted per class, 10%
         grayscale, quality 75-95. Image i is a pure function of (seed, i).

Runs in venv-torch (PIL and numpy):
    <venv-torch>/bin/python bench/peers/datasets.py --feedline BIN --small N --large M
prints {"small": path, "large": path}.
"""
import argparse
import concurrent.futures
import glob
import json
import os
import pathlib
import subprocess

import numpy as np
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "build" / "peers" / "data"
CLASSES = 10


def make_small(feedline, images):
    path = DATA / f"small-{images}"
    if not (path / ".complete").exists():
        subprocess.run([feedline, "gen-dataset", str(path), "--images", str(images), "--classes", str(CLASSES)],
                       check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        (path / ".complete").write_text("")
    return path


def photos():
    paths = sorted(glob.glob(str(ROOT / "tests" / "data" / "photos" / "*.jpg")) +
                   glob.glob(str(ROOT / "tests" / "data" / "photos" / "*.png")))
    return [Image.open(p).convert("RGB") for p in paths]


def large_image(src_photos, seed, i):
    rng = np.random.default_rng([seed, i])
    src = src_photos[int(rng.integers(len(src_photos)))]
    pixels = rng.uniform(1e6, 4e6)
    pick = rng.uniform()
    aspect = 4 / 3 if pick < 0.5 else 1.5 if pick < 0.7 else 1.0 if pick < 0.8 else rng.uniform(1.0, 1.8)
    long_side = int(round(np.sqrt(pixels * aspect)))
    short_side = int(round(long_side / aspect))
    w, h = (long_side, short_side) if rng.uniform() < 0.75 else (short_side, long_side)
    cw, ch = src.width, int(round(src.width * h / w))
    if ch > src.height:
        ch, cw = src.height, int(round(src.height * w / h))
    shrink = np.sqrt(rng.uniform(0.25, 1.0))
    cw, ch = max(8, int(cw * shrink)), max(8, int(ch * shrink))
    x0, y0 = int(rng.integers(0, src.width - cw + 1)), int(rng.integers(0, src.height - ch + 1))
    img = src.crop((x0, y0, x0 + cw, y0 + ch)).resize((w, h), Image.LANCZOS)
    a = np.asarray(img, dtype=np.float32)
    label = i % CLASSES
    tint = np.array([1 + 0.15 * np.cos(label + k * 2.1) for k in range(3)], dtype=np.float32)
    a = a * tint + rng.normal(0, 4, size=(h, w, 1)).astype(np.float32)
    img = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))
    if rng.uniform() < 0.1:
        img = img.convert("L")
    return label, img, int(rng.integers(75, 96))


def write_large(args):
    root, seed, i = args
    label, img, quality = large_image(photos_cache(), seed, i)
    out = root / f"class_{label:04d}" / f"img_{i:06d}.jpg"
    tmp = out.with_suffix(".tmp")
    img.save(tmp, "JPEG", quality=quality)
    os.replace(tmp, out)
    return out.stat().st_size


_PHOTOS = None


def photos_cache():
    global _PHOTOS
    if _PHOTOS is None:
        _PHOTOS = photos()
    return _PHOTOS


def make_large(images, seed=0):
    path = DATA / f"large-{images}"
    if not (path / ".complete").exists():
        for c in range(CLASSES):
            (path / f"class_{c:04d}").mkdir(parents=True, exist_ok=True)
        with concurrent.futures.ProcessPoolExecutor(os.cpu_count()) as ex:
            list(ex.map(write_large, [(path, seed, i) for i in range(images)], chunksize=4))
        (path / ".complete").write_text("")
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--feedline", required=True)
    ap.add_argument("--small", type=int, default=2000)
    ap.add_argument("--large", type=int, default=512)
    a = ap.parse_args()
    print(json.dumps({"small": str(make_small(a.feedline, a.small)), "large": str(make_large(a.large))}))


if __name__ == "__main__":
    main()
