"""torchvision transforms as they are (issue 16 item 3): a Compose (v1 or v2)
is translated into the native transform, and its output is torchvision's.

Bounds are test_image_reference.py's for the native recipes (0-255 scale):
full-size decode (exact=True) mean absolute difference <= 1.0 per sample;
the default reduced-scale DCT decode PSNR >= 30 dB. Random transforms are
compared for the same random parameters: torch is seeded, the box and flip
torchvision will draw are read with the same seed, and feedline's fused path
is handed that box (feedline._C.transform_image). Measured figures print
with -s.
"""
import math
import pathlib

import numpy as np
import pytest
import torch
import torchvision.transforms as T
from PIL import Image
from tv_steps import V2, needs_v2

import feedline
from feedline import _C
from feedline.transforms import UnsupportedTransformError, from_torchvision, translate

ROOT = pathlib.Path(__file__).resolve().parents[2]
PHOTOS = ROOT / "tests" / "data" / "photos"
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]



@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """The repo's photographs, plus JPEG re-encodings of the PNG ones, so every
    photo exercises the JPEG path too (as test_image_reference.py)."""
    out = []
    tmp = tmp_path_factory.mktemp("tv-jpegs")
    for p in sorted(PHOTOS.iterdir()):
        if p.suffix not in (".png", ".jpg"):
            continue
        out.append(p)
        if p.suffix == ".png":
            q = tmp / (p.stem + "_q90.jpg")
            Image.open(p).convert("RGB").save(q, quality=90)
            out.append(q)
    return out


def to_255(x, t):
    """A CHW output as float64 pixels on the 0-255 scale (normalisation undone)."""
    x = x.to(torch.float64) if isinstance(x, torch.Tensor) else torch.from_numpy(np.asarray(x)).to(torch.float64)
    if t.dtype == _C.DType.uint8:
        return x.numpy()
    if t.normalize:
        x = x * torch.tensor(t.std, dtype=torch.float64)[:, None, None] + \
            torch.tensor(t.mean, dtype=torch.float64)[:, None, None]
    return (x * 255).numpy()


_TORCH_DTYPE = {_C.DType.uint8: torch.uint8, _C.DType.float32: torch.float32, _C.DType.float16: torch.float16,
                _C.DType.bfloat16: torch.bfloat16}


def native(t, path, crop=None, flip=False):
    """feedline's fused path on one file: a CHW tensor of t's dtype."""
    raw = bytearray(_C.transform_image(pathlib.Path(path).read_bytes(), t, crop, flip))
    dtype = _TORCH_DTYPE[t.dtype]
    if dtype == torch.bfloat16:
        out = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16)
    else:
        out = torch.frombuffer(raw, dtype=dtype)
    return out.reshape(3, t.height, t.width)


def drawn_params(seed, img, scale, ratio, p):
    """The box and flip torchvision's RandomResizedCrop + RandomHorizontalFlip
    draw after torch.manual_seed(seed) (v1 and v2 draw the same numbers)."""
    torch.manual_seed(seed)
    i, j, h, w = T.RandomResizedCrop.get_params(img, list(scale), list(ratio))
    flip = bool(torch.rand(1) < p)
    return (j, i, w, h), flip


def psnr(a, b):
    mse = np.mean((a - b) ** 2)
    return float("inf") if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)


def train_forms():
    """(id, Compose factory, expected output dtype) for the random recipes."""
    forms = [
        ("v1-totensor", lambda: T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                                           T.Normalize(MEAN, STD)]), torch.float32),
        ("v1-bicubic-rect", lambda: T.Compose([
            T.RandomResizedCrop((160, 192), scale=(0.3, 0.9), ratio=(0.5, 2.0),
                                interpolation=T.InterpolationMode.BICUBIC),
            T.RandomHorizontalFlip(p=0.7), T.ToTensor()]), torch.float32),
        ("v1-pil-to-tensor-uint8", lambda: T.Compose([T.RandomResizedCrop(128), T.RandomHorizontalFlip(),
                                                      T.PILToTensor()]), torch.uint8),
        # Equivalent orders: the flip and Normalize commute with the conversion.
        ("v1-flip-after-totensor", lambda: T.Compose([T.RandomResizedCrop(224), T.ToTensor(),
                                                      T.RandomHorizontalFlip(), T.Normalize(MEAN, STD)]),
         torch.float32),
        ("v1-flip-last", lambda: T.Compose([T.RandomResizedCrop(224), T.ToTensor(), T.Normalize(MEAN, STD),
                                            T.RandomHorizontalFlip()]), torch.float32),
        # The crop on a uint8 tensor (antialias=True), converted to float after.
        ("v1-pil-to-tensor-first", lambda: T.Compose([T.PILToTensor(), T.RandomResizedCrop(224, antialias=True),
                                                      T.RandomHorizontalFlip(), T.ConvertImageDtype(torch.float32),
                                                      T.Normalize(MEAN, STD)]), torch.float32),
        ("v1-half", lambda: T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                                       T.Normalize(MEAN, STD), T.ConvertImageDtype(torch.float16)]), torch.float16),
    ]
    if V2 is not None:
        forms += [
            ("v2-pil", lambda: V2.Compose([V2.RandomResizedCrop(224, antialias=True), V2.RandomHorizontalFlip(),
                                           V2.ToImage(), V2.ToDtype(torch.float32, scale=True),
                                           V2.Normalize(MEAN, STD)]), torch.float32),
            # torchvision's documented v2 recipe: the crop runs on a uint8 tensor.
            ("v2-toimage-first", lambda: V2.Compose([V2.ToImage(), V2.RandomResizedCrop(224, antialias=True),
                                                     V2.RandomHorizontalFlip(p=0.5),
                                                     V2.ToDtype(torch.float32, scale=True),
                                                     V2.Normalize(MEAN, STD)]), torch.float32),
            ("v2-bfloat16", lambda: V2.Compose([V2.RandomResizedCrop(224, antialias=True), V2.ToImage(),
                                                V2.ToDtype(torch.bfloat16, scale=True)]), torch.bfloat16),
            ("v2-uint8", lambda: V2.Compose([V2.RandomResizedCrop(96, antialias=True), V2.RandomHorizontalFlip(),
                                             V2.ToImage()]), torch.uint8),
        ]
    return forms


@pytest.mark.parametrize("name,make,dtype", train_forms(), ids=[f[0] for f in train_forms()])
def test_random_compose_matches_torchvision_for_the_same_draws(images, name, make, dtype):
    compose = make()
    t = from_torchvision(compose, exact=True)
    assert _TORCH_DTYPE[t.dtype] == dtype
    crop_member = next(m for m in compose.transforms if type(m).__name__ == "RandomResizedCrop")
    flip_p = next((m.p for m in compose.transforms if type(m).__name__ == "RandomHorizontalFlip"), 0.0)
    worst = 0.0
    flips = 0
    for k, path in enumerate(images):
        img = Image.open(path).convert("RGB")
        for seed in (k, 100 + k, 200 + k):
            box, flip = drawn_params(seed, img, crop_member.scale, crop_member.ratio, flip_p)
            torch.manual_seed(seed)
            ref = compose(img)
            got = native(t, path, box, flip)
            assert got.dtype == ref.dtype and tuple(got.shape) == tuple(ref.shape), name
            mae = float(np.abs(to_255(got, t) - to_255(ref, t)).mean())
            worst = max(worst, mae)
            flips += flip
            assert mae <= 1.0, f"{name} {path.name} seed {seed} box {box} flip {flip}: MAE {mae:.3f}"
    print(f"\n{name}: worst MAE {worst:.4f} (0-255) over {3 * len(images)} draws, {flips} flipped")


def eval_forms():
    forms = [
        ("v1", lambda: T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)])),
        ("v1-bicubic-list", lambda: T.Compose([T.Resize([232], interpolation=T.InterpolationMode.BICUBIC),
                                               T.CenterCrop((224, 200)), T.ToTensor(), T.Normalize(MEAN, STD)])),
        ("v1-exact-size-uint8", lambda: T.Compose([T.Resize((180, 240)), T.PILToTensor()])),
    ]
    if V2 is not None:
        forms += [
            ("v2", lambda: V2.Compose([V2.Resize(256, antialias=True), V2.CenterCrop(224), V2.ToImage(),
                                       V2.ToDtype(torch.float32, scale=True), V2.Normalize(MEAN, STD)])),
            ("v2-toimage-first", lambda: V2.Compose([V2.ToImage(), V2.Resize(256, antialias=True),
                                                     V2.CenterCrop(224), V2.ToDtype(torch.float16, scale=True)])),
        ]
    return forms


@pytest.mark.parametrize("name,make", eval_forms(), ids=[f[0] for f in eval_forms()])
def test_eval_compose_through_the_loader_matches_torchvision_per_sample(dataset, images, name, make):
    """The Loader given the Compose itself; every sample of a generated folder
    (and every photograph) compared with torchvision's output for it."""
    compose = make()
    with feedline.Loader(dataset, batch_size=16, transform=from_torchvision(compose, exact=True),
                         num_threads=2) as exact_loader, \
            feedline.Loader(dataset, batch_size=16, transform=compose, num_threads=2) as loader:
        assert loader.transform_source is not None and loader.transform_source.source is compose
        samples = loader.samples
        got_exact = torch.cat([x for x, _ in exact_loader])
        got_default = torch.cat([x for x, _ in loader])
    t_exact, t = exact_loader.transform, loader.transform
    assert len(got_exact) == len(samples) == 96
    worst, low = 0.0, float("inf")
    for (path, _), a, b in zip(samples, got_exact, got_default):
        ref = compose(Image.open(path).convert("RGB"))
        assert a.dtype == ref.dtype and a.shape == ref.shape
        mae = float(np.abs(to_255(a, t_exact) - to_255(ref, t_exact)).mean())
        worst = max(worst, mae)
        assert mae <= 1.0, f"{name} {path}: MAE {mae:.3f}"
        p = psnr(to_255(b, t), to_255(ref, t))
        low = min(low, p)
        assert p >= 30.0, f"{name} {path}: PSNR {p:.1f} dB with the default DCT-scaled decode"
    for path in images:  # the photographs, larger and of other sizes
        ref = compose(Image.open(path).convert("RGB"))
        mae = float(np.abs(to_255(native(t_exact, path), t_exact) - to_255(ref, t_exact)).mean())
        worst = max(worst, mae)
        assert mae <= 1.0, f"{name} {path.name}: MAE {mae:.3f}"
    print(f"\n{name}: worst MAE {worst:.4f} (exact decode), min PSNR {low:.1f} dB (default) "
          f"over {len(samples)} samples + {len(images)} photos")


def test_loader_with_a_compose_gives_the_native_recipes_bytes(dataset):
    """Translation, not approximation: the Compose and the hand-written native
    recipe give the same bytes for the same seed, random crops included."""
    compose = T.Compose([T.RandomResizedCrop(160), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
    native_t = feedline.transforms.random_resized_crop(160)
    kw = dict(batch_size=32, shuffle=True, seed=5, num_threads=2)
    with feedline.Loader(dataset, transform=compose, **kw) as a, \
            feedline.Loader(dataset, transform=native_t, **kw) as b:
        for (xa, ya), (xb, yb) in zip(a, b):
            assert torch.equal(xa, xb) and torch.equal(ya, yb)
        assert [m[2].split()[0] for m in a.transform_source.members] == ["crop", "horizontal", "float32", "normalize"]
        assert b.transform_source is None


def test_translation_fields():
    t = from_torchvision(T.Compose([T.RandomResizedCrop((160, 192), scale=(0.2, 0.8), ratio=(0.5, 1.5),
                                                        interpolation=T.InterpolationMode.BICUBIC),
                                    T.RandomHorizontalFlip(0.25), T.ToTensor(), T.Normalize([0.5], [0.25])]))
    assert t.crop == _C.CropMode.RANDOM_RESIZED and (t.height, t.width) == (160, 192)
    assert t.scale == pytest.approx([0.2, 0.8]) and t.ratio == pytest.approx([0.5, 1.5])
    assert t.interpolation == _C.Interpolation.BICUBIC and t.hflip_prob == 0.25
    assert t.normalize and t.mean == pytest.approx([0.5] * 3) and t.std == pytest.approx([0.25] * 3)
    assert t.dtype == _C.DType.float32 and t.layout == _C.Layout.CHW and t.dct_scaling
    assert not from_torchvision(T.Compose([T.RandomResizedCrop(8), T.ToTensor()]), exact=True).dct_scaling
    e = from_torchvision(T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor()]))
    assert e.crop == _C.CropMode.RESIZE_CENTER and e.resize_size == 256 and not e.normalize
    assert e.hflip_prob == 0.0
    full = from_torchvision(T.Compose([T.Resize((100, 120)), T.CenterCrop((100, 120)), T.PILToTensor()]))
    assert full.crop == _C.CropMode.RESIZE_FULL and (full.height, full.width) == (100, 120)
    assert full.dtype == _C.DType.uint8
    # A flip before RandomResizedCrop is the same distribution (the box's position is symmetric).
    assert from_torchvision(T.Compose([T.RandomHorizontalFlip(), T.RandomResizedCrop(64), T.ToTensor()])).hflip_prob \
        == 0.5
    # Nested Compose members are read in order.
    nested = from_torchvision(T.Compose([T.Compose([T.Resize(64), T.CenterCrop(56)]), T.ToTensor()]))
    assert nested.crop == _C.CropMode.RESIZE_CENTER and nested.height == 56


class Sharpen:  # a user's own transform
    def __call__(self, img):
        return img


def unsupported_members():
    out = [
        ("RandomRotation", lambda: T.RandomRotation(10, expand=True), "expand=True"),  # native with expand=False
        # ColorJitter and GaussianBlur are native now (test_pixel_ops.py names their refusals).
        ("RandomPerspective", lambda: T.RandomPerspective(), "no native op yet"),
        # RandomErasing is native after the tensor conversion (test_batch_augment.py); on a PIL image it is not.
        ("RandomErasing", lambda: T.RandomErasing(), "on a PIL image"),
        # RandomCrop, Pad and RandomVerticalFlip are native in their places (test_geometry_ops.py); not here.
        ("RandomCrop", lambda: T.RandomCrop(32), "a second crop"),
        ("Pad", lambda: T.Pad(2), "Pad after the resize or crop"),
        ("<lambda>", lambda: (lambda x: x), "a lambda"),
        ("Sharpen", lambda: Sharpen(), "a Python class"),
        ("Lambda", lambda: T.Lambda(lambda x: x), "a Python function"),
        ("Resize", lambda: T.Resize(72, interpolation=T.InterpolationMode.NEAREST), "interpolation NEAREST"),
    ]
    if V2 is not None:
        out += [("RandomRotation", lambda: V2.RandomRotation(10, expand=True), "expand=True"),
                ("RandomPerspective", lambda: V2.RandomPerspective(), "no native op yet")]
    return out


@pytest.mark.parametrize("name,make,reason", unsupported_members(), ids=[u[0] + str(i)
                                                                        for i, u in enumerate(unsupported_members())])
def test_every_unsupported_member_is_named_with_position_and_reason(dataset, name, make, reason):
    member = make()
    if name == "Resize":  # the geometry itself: put something native before it
        compose = T.Compose([T.PILToTensor(), member, T.CenterCrop(64), T.ConvertImageDtype(torch.float32)])
    else:
        compose = T.Compose([T.RandomResizedCrop(64), member, T.ToTensor()])
    with pytest.raises(UnsupportedTransformError) as e:
        from_torchvision(compose)
    err = e.value
    assert isinstance(err, feedline.Error) and isinstance(err, ValueError)
    assert err.members and err.members[0].position == "1"
    assert name in err.members[0].member and reason in err.members[0].reason, str(err)
    assert "at position 1" in str(err) and reason in str(err) and "strict=True" in str(err)
    # strict=False runs it in Python (test_python_ops.py), named with its reason; never dropped.
    split = translate(compose, strict=False)
    assert split.chain is not None and split.chain.name.startswith("python:")
    named = {m.position: m for m in split.python_members}
    assert "1" in named and reason in named["1"].reason
    # The Loader with strict=True refuses it too, before opening anything.
    with pytest.raises(UnsupportedTransformError, match="at position 1"):
        feedline.Loader(dataset, batch_size=8, transform=compose, strict=True)


def test_several_unsupported_members_are_all_named():
    compose = T.Compose([T.RandomResizedCrop(64), T.RandomRotation(5, expand=True), T.ToTensor(),
                         T.RandomVerticalFlip()])
    with pytest.raises(UnsupportedTransformError) as e:
        from_torchvision(compose)
    assert [(m.position, m.member.split("(")[0]) for m in e.value.members] == [("1", "RandomRotation"),
                                                                              ("3", "RandomVerticalFlip")]


@pytest.mark.parametrize("compose,reason", [
    (lambda: T.Compose([T.Resize(200), T.CenterCrop(224), T.ToTensor()]), "pads with zeros"),
    (lambda: T.Compose([T.Resize(256), T.ToTensor()]), "Resize(int) without a CenterCrop"),
    (lambda: T.Compose([T.Resize(256, max_size=300), T.CenterCrop(224), T.ToTensor()]), "max_size=300"),
    (lambda: T.Compose([T.RandomResizedCrop(64), T.RandomHorizontalFlip()]), "no ToTensor, PILToTensor or ToImage"),
    (lambda: T.Compose([T.ToTensor(), T.CenterCrop(64)]), "CenterCrop on a float tensor"),
    (lambda: T.Compose([T.ToTensor(), T.Normalize(MEAN, STD)]), "no RandomResizedCrop, Resize or RandomCrop"),
    (lambda: T.Compose([T.RandomResizedCrop(64), T.PILToTensor(), T.Normalize(MEAN, STD)]), "needs a float tensor"),
    (lambda: T.Compose([T.ToTensor(), T.RandomResizedCrop(64, antialias=True)]), "on a float tensor"),
    (lambda: T.Compose([T.PILToTensor(), T.RandomResizedCrop(64, antialias=False), T.ConvertImageDtype(torch.float)]),
     "antialias=False"),
    (lambda: T.Compose([T.RandomHorizontalFlip(), T.Resize(72), T.CenterCrop(64), T.ToTensor()]),
     "a flip before Resize/CenterCrop"),
    (lambda: T.Compose([T.RandomResizedCrop(64), T.RandomResizedCrop(32), T.ToTensor()]), "a second resize or crop"),
    (lambda: T.RandomResizedCrop(64), "no ToTensor"),
], ids=["centercrop-pads", "resize-alone", "max-size", "no-tensor", "crop-only", "no-geometry",
        "normalize-uint8", "resize-float-tensor", "antialias-false", "flip-before-resize", "two-crops",
        "single-member"])
def test_forms_without_an_exact_native_equivalent_are_refused(compose, reason):
    with pytest.raises(UnsupportedTransformError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        from_torchvision(compose())


@needs_v2
def test_v2_specific_refusals():
    with pytest.raises(UnsupportedTransformError, match="scale=False"):
        from_torchvision(V2.Compose([V2.RandomResizedCrop(64), V2.ToImage(), V2.ToDtype(torch.float32)]))
    with pytest.raises(UnsupportedTransformError, match="antialias=False"):
        from_torchvision(V2.Compose([V2.ToImage(), V2.RandomResizedCrop(64, antialias=False)]))
    ok = from_torchvision(V2.Compose([V2.RandomResizedCrop(64), V2.ToImage(), V2.ToDtype(torch.float16, scale=True)]))
    assert ok.dtype == _C.DType.float16 and not ok.normalize


def test_a_single_member_and_other_objects():
    with pytest.raises(TypeError, match="torchvision transform"):
        feedline.Loader("/nonexistent", transform="imagenet")
    assert feedline.UnsupportedTransformError is UnsupportedTransformError
