"""RandomErasing (after normalisation) and MixUp / CutMix (on batches), issue
17 (python/feedline/_batch.py, src/image/augment_ops.cc).

For the same parameters (a fixed rectangle, lam, box) feedline's output is
compared with torchvision's functional erase and with the v2 formulas
(`batch.roll(1, 0) * (1 - lam) + batch * lam`, one-hot labels), exactly;
under a torchvision with transforms.v2 also with v2.MixUp / v2.CutMix's own
outputs. The random parameters are compared with torchvision's own draws
over many seeded samples (fixed seeds, bounds of several standard errors).
The loader paths are checked for same-seed-same-bytes at 1 and 4 threads,
resume, and against the kernels applied to the unmixed batches.
"""
import math
import pathlib

import numpy as np
import pytest
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image
from tv_steps import V2, needs_v2

import feedline
import feedline.transforms as ft
from feedline import _C
from feedline.transforms import UnsupportedTransformError, translate

ROOT = pathlib.Path(__file__).resolve().parents[2]
PHOTOS = ROOT / "tests" / "data" / "photos"

has_v2_mix = V2 is not None and hasattr(V2, "MixUp")
needs_v2_mix = pytest.mark.skipif(not has_v2_mix, reason="v2.MixUp / v2.CutMix need torchvision >= 0.16")

DT = {torch.float32: _C.DType.float32, torch.float16: _C.DType.float16, torch.bfloat16: _C.DType.bfloat16,
      torch.uint8: _C.DType.uint8}
FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def arr(t):
    return t.view(torch.int16).numpy() if t.dtype == torch.bfloat16 else t.numpy()


def photo_batch(dtype=torch.float32, n=4, size=(40, 56)):
    """n normalised photographs (distinct content), N x 3 x H x W."""
    imgs = []
    paths = sorted(p for p in PHOTOS.iterdir() if p.suffix in (".png", ".jpg"))
    for i in range(n):
        img = Image.open(paths[i % len(paths)]).convert("RGB").resize((size[1] + i, size[0] + i))
        x = torch.from_numpy(np.array(img)).permute(2, 0, 1)[:, i:i + size[0], :size[1]].float() / 255
        imgs.append(F.normalize(x, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]))
    return torch.stack(imgs).to(dtype).contiguous()


# -- RandomErasing: the kernel ---------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS + (torch.uint8,))
@pytest.mark.parametrize("value", [[0.0], [1.5, -2.25, 7.0], "noise"])
def test_erase_equals_torchvision_erase(dtype, value):
    """The rectangle and values given: equal to F.erase (and v2's when present), both layouts."""
    x = photo_batch(torch.float32, 2)
    x = (x * 40 + 100).clamp(0, 255).to(dtype) if dtype == torch.uint8 else x.to(dtype)
    i, j, h, w = 5, 11, 17, 23
    if value == "noise":
        if dtype == torch.uint8:
            return
        g = torch.Generator().manual_seed(0)
        v = torch.randn(3, h, w, generator=g)
        values, per_pixel = v.flatten().tolist(), True
    else:
        v = torch.tensor(value * (3 // len(value)))[:, None, None]
        values, per_pixel = [float(a) for a in v.flatten()], False
        if dtype == torch.uint8:
            v = v.abs() * 30
            values = [float(a) for a in v.flatten()]
    refs = [F.erase(x, i, j, h, w, v)]
    if V2 is not None and hasattr(V2, "functional") and hasattr(V2.functional, "erase"):
        refs.append(V2.functional.erase(x, i, j, h, w, v))
    got = x.clone()
    _C.erase_rect(arr(got), DT[dtype], _C.Layout.CHW, i, j, h, w, values, per_pixel)
    hwc = x.permute(0, 2, 3, 1).contiguous()
    _C.erase_rect(arr(hwc), DT[dtype], _C.Layout.HWC, i, j, h, w, values, per_pixel)
    for ref in refs:
        assert torch.equal(got, ref)
        assert torch.equal(hwc.permute(0, 3, 1, 2), ref)


def test_random_erasing_callable_erases_one_rectangle_reproducibly():
    x = photo_batch(torch.float32, 1)[0]
    op = ft.RandomErasing(p=1.0, value=(1.0, 2.0, 3.0))
    torch.manual_seed(4)
    a = op(x)
    torch.manual_seed(4)
    b = op(x)
    assert torch.equal(a, b) and a.dtype == x.dtype and a.shape == x.shape
    assert not torch.equal(a, x)  # a copy was erased, not the input
    changed = (a != x).any(0)
    rows, cols = changed.any(1).nonzero().flatten(), changed.any(0).nonzero().flatten()
    top, left = int(rows[0]), int(cols[0])
    h, w = int(rows[-1]) - top + 1, int(cols[-1]) - left + 1
    for c, want in enumerate((1.0, 2.0, 3.0)):
        assert torch.all(a[c, top:top + h, left:left + w] == want)
    assert torch.equal(F.erase(x, top, left, h, w, torch.tensor([1.0, 2.0, 3.0])[:, None, None]), a)
    # A batch gets one rectangle for all of its images (torchvision draws once per call).
    batch = photo_batch(torch.float32, 3)
    out = op(batch)
    masks = [(out[k] != batch[k]).any(0) for k in range(3)]
    assert torch.equal(masks[0], masks[1]) and torch.equal(masks[1], masks[2])
    # inplace=True erases the input itself.
    y = x.clone()
    z = ft.RandomErasing(p=1.0, value=5.0, inplace=True)(y)
    assert z is y and (y == 5.0).any()


def test_random_value_is_standard_normal_noise():
    x = torch.zeros(3, 200, 200)
    torch.manual_seed(0)
    out = ft.RandomErasing(p=1.0, scale=(0.3, 0.33), value="random")(x)
    region = out[out != 0]
    assert region.numel() > 30000
    assert abs(float(region.mean())) < 0.05 and abs(float(region.std()) - 1) < 0.05


def test_erase_parameters_are_refused_as_torchvision_refuses():
    with pytest.raises(ValueError, match="Scale should be between 0 and 1"):
        ft.RandomErasing(scale=(0.1, 1.5))
    with pytest.raises(ValueError, match="'random'"):
        ft.RandomErasing(value="noise")
    with pytest.raises(ValueError, match="between 0 and 1"):
        ft.RandomErasing(p=1.5)
    with pytest.raises(ValueError, match="single value or 3"):
        ft.RandomErasing(p=1.0, value=(1.0, 2.0))(torch.zeros(3, 8, 8))
    with pytest.raises(ValueError, match="uint8"):
        ft.RandomErasing(p=1.0, value="random")(torch.zeros(3, 8, 8, dtype=torch.uint8))
    with pytest.raises(TypeError, match="tensor"):
        ft.RandomErasing()(np.zeros((3, 8, 8)))


def _tv_erase_draw(img, scale, ratio):
    """torchvision's RandomErasing.get_params (v1; v2's is the same loop)."""
    i, j, h, w, v = T.RandomErasing.get_params(img, scale=scale, ratio=ratio, value=[0.0])
    return (h, w) if v is not img else None


def test_erase_rectangles_follow_torchvisions_distribution():
    """Means of h, w and the erased fraction, and the no-erase rate, over 3000
    draws each, against torchvision's get_params with a fixed seed."""
    cases = [((37, 53), (0.02, 0.33), (0.3, 3.3)), ((64, 64), (0.3, 0.9), (0.5, 2.0))]
    for (H, W), scale, ratio in cases:
        op = ft.RandomErasing(p=1.0, scale=scale, ratio=ratio).op()
        ours = [_C.draw_erase(op, H, W, seed=3, sample_id=k) for k in range(3000)]
        ours = [(r.height, r.width) for r in ours if r.erase] + [None] * sum(not r.erase for r in ours)
        torch.manual_seed(3)
        img = torch.zeros(3, H, W)
        theirs = [_tv_erase_draw(img, scale, ratio) for _ in range(3000)]
        for a, b in ((ours, theirs),):
            kept_a, kept_b = [d for d in a if d], [d for d in b if d]
            # no-erase rate: counts of two binomials of n = 3000
            pa, pb = 1 - len(kept_a) / 3000, 1 - len(kept_b) / 3000
            assert abs(pa - pb) <= 6 * math.sqrt(max(pa, pb, 1e-3) * 2 / 3000) + 0.002, (pa, pb)
            for k in (0, 1):
                ma, mb = np.mean([d[k] for d in kept_a]), np.mean([d[k] for d in kept_b])
                sd = np.std([d[k] for d in kept_b])
                assert abs(ma - mb) <= 6 * sd * math.sqrt(2 / len(kept_b)), (k, ma, mb)
            fa = np.mean([d[0] * d[1] for d in kept_a]) / (H * W)
            fb = np.mean([d[0] * d[1] for d in kept_b]) / (H * W)
            assert abs(fa - fb) < 0.02, (fa, fb)


def test_erase_probability_is_p():
    op = ft.RandomErasing(p=0.25).op()
    n = sum(_C.draw_erase(op, 64, 64, seed=1, sample_id=k).erase for k in range(4000))
    assert abs(n / 4000 - 0.25) < 0.03  # 4.4 standard errors; a few of the 0.25 fail all 10 attempts


# -- RandomErasing: translation and the fused loader path --------------------------

def test_erasing_translates_after_normalize_and_is_refused_before_it():
    c = T.Compose([T.RandomResizedCrop(64), T.ToTensor(), T.Normalize([0.5] * 3, [0.2] * 3),
                   T.RandomErasing(p=0.3, scale=(0.1, 0.2), ratio=(0.5, 2.0), value=(1, 2, 3))])
    t = translate(c).transform
    assert len(t.erase_ops) == 1
    e = t.erase_ops[0]
    assert e.p == pytest.approx(0.3) and list(e.scale) == pytest.approx([0.1, 0.2]) and list(e.value) == [1, 2, 3]
    r = translate(T.Compose([T.RandomResizedCrop(64), T.ToTensor(), T.RandomErasing(value="random")])).transform
    assert r.erase_ops[0].random_value
    with pytest.raises(UnsupportedTransformError, match="after RandomErasing"):
        translate(T.Compose([T.RandomResizedCrop(64), T.ToTensor(), T.RandomErasing(),
                             T.Normalize([0.5] * 3, [0.2] * 3)]))
    with pytest.raises(UnsupportedTransformError, match="PIL image"):
        translate(T.Compose([T.RandomResizedCrop(64), T.RandomErasing(), T.ToTensor()]))
    # feedline's own op inside a Compose
    f = translate(T.Compose([T.RandomResizedCrop(64), T.ToTensor(), ft.RandomErasing(p=1.0)])).transform
    assert len(f.erase_ops) == 1


@needs_v2
def test_v2_erasing_translates():
    c = V2.Compose([V2.RandomResizedCrop(64, antialias=True), V2.PILToTensor(),
                    V2.ConvertImageDtype(torch.float32) if not hasattr(V2, "ToDtype") else
                    V2.ToDtype(torch.float32, scale=True), V2.Normalize([0.5] * 3, [0.2] * 3),
                    V2.RandomErasing(p=0.5, value="random")])
    t = translate(c).transform
    assert len(t.erase_ops) == 1 and t.erase_ops[0].random_value


SENTINEL = -100.0  # a normalised value no photograph reaches


def _native(dtype, channels_last, erase):
    t = ft.random_resized_crop(48, dtype=dtype, channels_last=channels_last)
    return ft.with_random_erasing(t, erase) if erase is not None else t


@pytest.mark.parametrize("dtype,channels_last", [(torch.float32, False), (torch.float16, True),
                                                 (torch.bfloat16, False), (torch.float32, True)])
def test_loader_erases_one_rectangle_per_sample_on_the_normalised_output(dataset, dtype, channels_last):
    erase = ft.RandomErasing(p=1.0, value=SENTINEL)
    with feedline.Loader(dataset, batch_size=16, transform=_native(dtype, channels_last, erase), seed=5,
                         num_threads=2) as loader:
        got = torch.cat([x for x, _ in loader])
    with feedline.Loader(dataset, batch_size=16, transform=_native(dtype, channels_last, None), seed=5,
                         num_threads=2) as loader:
        plain = torch.cat([x for x, _ in loader])
    if channels_last:
        got, plain = got.permute(0, 3, 1, 2), plain.permute(0, 3, 1, 2)
    erased = 0
    for k in range(len(got)):
        mask = got[k] == SENTINEL
        assert torch.equal(mask[0], mask[1]) and torch.equal(mask[1], mask[2])
        m = mask[0]
        assert torch.equal(got[k][~mask], plain[k][~mask])  # the crop and flip are unchanged
        if m.any():
            rows, cols = m.any(1).nonzero().flatten(), m.any(0).nonzero().flatten()
            assert int(m.sum()) == len(rows) * len(cols)  # one rectangle
            assert len(rows) < 48 and len(cols) < 48
            erased += 1
    assert erased >= len(got) * 0.95


def test_loader_erase_same_seed_same_bytes_at_1_and_4_threads(dataset):
    c = T.Compose([T.RandomResizedCrop(48), T.RandomHorizontalFlip(), T.ToTensor(),
                   T.Normalize([0.5] * 3, [0.25] * 3), T.RandomErasing(p=0.5, value="random")])
    out = []
    for threads in (1, 4):
        with feedline.Loader(dataset, batch_size=8, transform=c, seed=3, num_threads=threads) as loader:
            assert loader.transform_source.chain is None
            out.append(torch.cat([x for x, _ in loader]))
    assert torch.equal(out[0], out[1])
    plain = T.Compose(c.transforms[:-1])
    with feedline.Loader(dataset, batch_size=8, transform=plain, seed=3, num_threads=2) as loader:
        base = torch.cat([x for x, _ in loader])
    assert not torch.equal(base, out[0])  # the erase ran


# -- MixUp / CutMix: the kernels against the v2 formulas -------------------------

TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def v2_mixup(x, labels, lam, num_classes):
    """torchvision.transforms.v2.MixUp._transform, as its source writes it,
    evaluated as torch 2 does: a Python scalar times a float16/bfloat16
    tensor is computed in float32 and rounded once. torch 1.13 rounded the
    scalar to the tensor's dtype first (up to one ulp apart); feedline
    follows torch 2, the generation that has v2.MixUp, so under torch 1.13
    the reference spells torch 2's arithmetic out."""
    soft = torch.nn.functional.one_hot(labels, num_classes=num_classes).float()
    y = soft.roll(1, 0).mul_(1.0 - lam).add_(soft.mul(lam))
    if TORCH2 or x.dtype == torch.float32:
        return x.roll(1, 0).mul_(1.0 - lam).add_(x.mul(lam)), y
    m, l = torch.tensor(1.0 - lam, dtype=torch.float32), torch.tensor(lam, dtype=torch.float32)
    a = (x.roll(1, 0).float() * m).to(x.dtype)
    b = (x.float() * l).to(x.dtype)
    return (a.float() + b.float()).to(x.dtype), y


def v2_cutmix(x, labels, box, num_classes):
    x1, y1, x2, y2 = box
    out = x.clone()
    out[..., y1:y2, x1:x2] = x.roll(1, 0)[..., y1:y2, x1:x2]
    lam = float(1.0 - (x2 - x1) * (y2 - y1) / (x.shape[-1] * x.shape[-2]))
    soft = torch.nn.functional.one_hot(labels, num_classes=num_classes).float()
    return out, soft.roll(1, 0).mul_(1.0 - lam).add_(soft.mul(lam))


def params(kind, lam=0.5, box=(0, 0, 0, 0), H=1, W=1):
    p = _C.BatchMixParams()
    p.kind = getattr(_C.BatchMixKind, kind)
    p.lam = lam
    p.x1, p.y1, p.x2, p.y2 = box
    p.label_lam = lam if kind == "MIXUP" else 1.0 - (box[2] - box[0]) * (box[3] - box[1]) / (H * W)
    return p


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("lam", [0.0, 0.137, 0.5, 0.8721, 1.0])
@pytest.mark.parametrize("channels_last", [False, True])
def test_mixup_equals_the_v2_formula(dtype, lam, channels_last):
    x = photo_batch(dtype, 5)
    labels = torch.tensor([3, 0, 0, 9, 3])
    want_x, want_y = v2_mixup(x, labels, lam, 10)
    got = (x.permute(0, 2, 3, 1) if channels_last else x).contiguous().clone()
    soft = _C.apply_batch_mix(params("MIXUP", lam), arr(got), DT[dtype],
                              _C.Layout.HWC if channels_last else _C.Layout.CHW, labels.numpy(), 10)
    got = got.permute(0, 3, 1, 2) if channels_last else got
    assert torch.equal(got, want_x), (got.float() - want_x.float()).abs().max()
    assert torch.equal(torch.from_numpy(soft), want_y)


@pytest.mark.parametrize("dtype", FLOATS + (torch.uint8,))
@pytest.mark.parametrize("box", [(0, 0, 56, 40), (3, 7, 30, 21), (10, 10, 10, 25), (55, 39, 56, 40)])
@pytest.mark.parametrize("channels_last", [False, True])
def test_cutmix_equals_the_v2_formula(dtype, box, channels_last):
    x = photo_batch(torch.float32, 3)
    x = (x * 40 + 100).clamp(0, 255).to(dtype) if dtype == torch.uint8 else x.to(dtype)
    labels = torch.tensor([1, 2, 0])
    want_x, want_y = v2_cutmix(x, labels, box, 4)
    got = (x.permute(0, 2, 3, 1) if channels_last else x).contiguous().clone()
    soft = _C.apply_batch_mix(params("CUTMIX", 0.3, box, 40, 56), arr(got), DT[dtype],
                              _C.Layout.HWC if channels_last else _C.Layout.CHW, labels.numpy(), 4)
    got = got.permute(0, 3, 1, 2) if channels_last else got
    assert torch.equal(got, want_x)
    assert torch.equal(torch.from_numpy(soft), want_y)


@needs_v2_mix
@pytest.mark.parametrize("cls", ["MixUp", "CutMix"])
def test_mixes_equal_torchvision_v2_for_its_own_draws(cls):
    """v2's output, its lam / box recovered from its labels and images, and
    feedline's kernels run with those parameters: equal."""
    x = photo_batch(torch.float32, 4)
    labels = torch.tensor([0, 1, 2, 3])
    for seed in range(5):
        torch.manual_seed(seed)
        out_x, out_y = getattr(V2, cls)(alpha=1.0, num_classes=4)(x, labels)
        lam = float(out_y[1, 1])  # sample 1's own label weight (its partner has label 0)
        if cls == "MixUp":
            p = params("MIXUP", lam)
        else:
            diff = (out_x != x).any(1).any(0)
            if not diff.any():
                p = params("CUTMIX", 1.0, (0, 0, 0, 0), 40, 56)
            else:
                rows, cols = diff.any(1).nonzero().flatten(), diff.any(0).nonzero().flatten()
                box = (int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1)
                p = params("CUTMIX", 0.5, box, 40, 56)
                assert p.label_lam == pytest.approx(lam, abs=1e-6)
        got = x.clone()
        soft = _C.apply_batch_mix(p, arr(got), _C.DType.float32, _C.Layout.CHW, labels.numpy(), 4)
        assert torch.equal(got, out_x)
        assert torch.allclose(torch.from_numpy(soft), out_y, atol=1e-6)


def test_beta_draws_follow_torchs_beta():
    for a in (0.2, 1.0):
        ours = _C.sample_beta(a, a, seed=1, count=20000)
        torch.manual_seed(1)
        theirs = torch.distributions.Beta(torch.tensor([a]), torch.tensor([a])).sample((20000,)).flatten().numpy()
        sd = math.sqrt(1 / (4 * (2 * a + 1)))
        assert abs(ours.mean() - theirs.mean()) < 6 * sd * math.sqrt(2 / 20000)
        assert abs(ours.var() - theirs.var()) < 0.1 * theirs.var()
        # the tails: P(x < 0.1) as torch's within 0.015
        assert abs((ours < 0.1).mean() - (theirs < 0.1).mean()) < 0.015


def _tv_cutmix_label_lam(lam, H, W):
    """CutMix._get_params with torch's generator."""
    r_x, r_y = int(torch.randint(W, (1,))), int(torch.randint(H, (1,)))
    r = 0.5 * math.sqrt(1.0 - lam)
    rw, rh = int(r * W), int(r * H)
    x1, y1, x2, y2 = max(r_x - rw, 0), max(r_y - rh, 0), min(r_x + rw, W), min(r_y + rh, H)
    return 1.0 - (x2 - x1) * (y2 - y1) / (W * H)


def test_batch_draws_follow_torchvision():
    mix, cut = ft.MixUp(alpha=0.2, num_classes=10), ft.CutMix(alpha=1.0, num_classes=10)
    choice = ft.RandomChoice([mix, cut])
    draws = [_C.draw_batch_mix(choice.choices, 40, 56, seed=2, stream_id=k) for k in range(4000)]
    mixups = [d for d in draws if d.kind == _C.BatchMixKind.MIXUP]
    assert abs(len(mixups) / 4000 - 0.5) < 0.04  # RandomChoice: uniform
    lam = np.array([d.lam for d in mixups])
    assert abs(lam.mean() - 0.5) < 0.03 and abs(lam.var() - 1 / (4 * 1.4)) < 0.02
    cut_lams = np.array([d.label_lam for d in draws if d.kind == _C.BatchMixKind.CUTMIX])
    torch.manual_seed(2)
    beta = torch.distributions.Beta(torch.tensor([1.0]), torch.tensor([1.0]))
    theirs = np.array([_tv_cutmix_label_lam(float(beta.sample(())), 40, 56) for _ in range(len(cut_lams))])
    assert abs(cut_lams.mean() - theirs.mean()) < 6 * theirs.std() * math.sqrt(2 / len(theirs))
    weighted = ft.RandomChoice([mix, cut], p=[0.8, 0.2])
    n = sum(_C.draw_batch_mix(weighted.choices, 40, 56, seed=2, stream_id=k).kind == _C.BatchMixKind.MIXUP
            for k in range(4000))
    assert abs(n / 4000 - 0.8) < 0.03


def test_callable_mixes_return_new_tensors_as_v2_does():
    x = photo_batch(torch.float32, 4)
    labels = torch.tensor([0, 1, 2, 3])
    before = x.clone()
    torch.manual_seed(0)
    out_x, out_y = ft.MixUp(alpha=1.0, num_classes=4)(x, labels)
    assert torch.equal(x, before) and out_y.shape == (4, 4) and out_y.dtype == torch.float32
    lam = float(out_y[1, 1])  # lam rounded to float32: the images agree to that precision
    assert torch.allclose(out_x, v2_mixup(x, labels, lam, 4)[0], atol=1e-5)
    assert torch.allclose(out_y.sum(1), torch.ones(4))
    packed = ft.CutMix(alpha=1.0, num_classes=4)((x, labels))
    assert isinstance(packed, tuple) and packed[1].shape == (4, 4)


def test_bad_mix_parameters_are_refused():
    with pytest.raises(ValueError, match="alpha"):
        ft.MixUp(alpha=0.0, num_classes=10)
    with pytest.raises(ValueError, match="alpha"):
        ft.CutMix(alpha=-1.0, num_classes=10)
    with pytest.raises(ValueError, match="num_classes"):
        ft.MixUp(alpha=1.0, num_classes=0)
    with pytest.raises(ValueError, match="num_classes"):
        ft.MixUp(alpha=1.0)
    with pytest.raises(ValueError, match="differs"):
        ft.RandomChoice([ft.MixUp(num_classes=3), ft.CutMix(num_classes=4)])
    with pytest.raises(TypeError, match="not MixUp or CutMix"):
        ft.RandomChoice([ft.MixUp(num_classes=3), T.RandomErasing()])
    x = photo_batch(torch.float32, 2)
    with pytest.raises(ValueError, match=r"label 5 of sample 1 of the batch"):
        ft.MixUp(num_classes=4)(x, torch.tensor([0, 5]))
    with pytest.raises(ValueError, match="shape"):
        ft.MixUp(num_classes=4)(x, torch.zeros(2, 4, dtype=torch.int64))
    with pytest.raises(ValueError, match="uint8"):
        ft.MixUp(num_classes=4)(x.to(torch.uint8), torch.tensor([0, 1]))


def test_a_uint8_loader_with_mixup_is_refused_at_construction_and_cutmix_alone_runs(dataset):
    with pytest.raises(ValueError, match="MixUp blends float images"):
        feedline.Loader(dataset, batch_size=4, transform=T.Compose([T.RandomResizedCrop(32), T.PILToTensor()]),
                        batch_transform=ft.RandomChoice([ft.MixUp(num_classes=4), ft.CutMix(num_classes=4)]))
    with feedline.Loader(dataset, batch_size=4, transform=T.Compose([T.RandomResizedCrop(32), T.PILToTensor()]),
                         batch_transform=ft.CutMix(num_classes=4), seed=2) as loader:
        x, y = next(iter(loader))
    assert x.dtype == torch.uint8 and y.shape == (4, 4)


def test_the_callables_return_on_the_inputs_device_and_copy_once():
    x = photo_batch(torch.float32, 2)
    out, soft = ft.MixUp(num_classes=4)(x, torch.tensor([0, 1]))
    assert out.device == x.device and soft.device == x.device
    assert out.data_ptr() != x.data_ptr()  # not in place: the input is left as it was
    img = x[0].clone()
    erased = ft.RandomErasing(p=1.0, value=0)(img)
    assert erased.data_ptr() != img.data_ptr() and not torch.equal(erased, img)


# -- MixUp / CutMix in the loader --------------------------------------------------

def _mix_choice(num_classes=4):
    if has_v2_mix:
        return V2.RandomChoice([V2.MixUp(alpha=0.2, num_classes=num_classes),
                                V2.CutMix(alpha=1.0, num_classes=num_classes)])
    return ft.RandomChoice([ft.MixUp(alpha=0.2, num_classes=num_classes),
                            ft.CutMix(alpha=1.0, num_classes=num_classes)])


def test_loader_batch_transform_is_the_kernels_on_each_batch(dataset):
    t = ft.random_resized_crop(32)
    with feedline.Loader(dataset, batch_size=16, transform=t, seed=7, num_threads=2) as loader:
        plain = [(x.clone(), y.clone()) for x, y in loader]
    choices = ft.RandomChoice([ft.MixUp(alpha=0.2, num_classes=4), ft.CutMix(alpha=1.0, num_classes=4)]).choices
    with feedline.Loader(dataset, batch_size=16, transform=ft.random_resized_crop(32), seed=7, num_threads=2,
                         batch_transform=_mix_choice()) as loader:
        mixed = [(x.clone(), y.clone()) for x, y in loader]
    kinds = set()
    for index, ((px, py), (mx, my)) in enumerate(zip(plain, mixed)):
        p = _C.draw_batch_mix(choices, 32, 32, seed=7, epoch=0, stream_id=index)
        kinds.add(p.kind)
        want = px.clone()
        soft = _C.apply_batch_mix(p, want.numpy(), _C.DType.float32, _C.Layout.CHW, py.numpy(), 4)
        assert torch.equal(mx, want) and torch.equal(my, torch.from_numpy(soft))
        assert my.shape == (16, 4) and torch.allclose(my.sum(1), torch.ones(16))
    assert len(mixed) == 6
    assert kinds == {_C.BatchMixKind.MIXUP, _C.BatchMixKind.CUTMIX}  # RandomChoice chose both (seed 7)


def test_loader_batch_transform_same_bytes_at_1_and_4_threads_and_after_resume(dataset):
    out = []
    for threads in (1, 4):
        with feedline.Loader(dataset, batch_size=8, seed=11, num_threads=threads, shuffle=True,
                             transform=ft.random_resized_crop(32), batch_transform=_mix_choice()) as loader:
            out.append([(x.clone(), y.clone()) for x, y in loader])
    for (a, b), (c, d) in zip(*out):
        assert torch.equal(a, c) and torch.equal(b, d)
    with feedline.Loader(dataset, batch_size=8, seed=11, num_threads=2, shuffle=True,
                         transform=ft.random_resized_crop(32), batch_transform=_mix_choice()) as loader:
        it = iter(loader)
        for _ in range(3):
            next(it)
        state = loader.state_dict()
    with feedline.Loader(dataset, batch_size=8, seed=11, num_threads=2, shuffle=True,
                         transform=ft.random_resized_crop(32), batch_transform=_mix_choice()) as loader:
        loader.load_state_dict(state)
        x, y = next(iter(loader))
    assert torch.equal(x, out[0][3][0]) and torch.equal(y, out[0][3][1])


def test_loader_channels_last_half_batches_mix(dataset):
    t = ft.random_resized_crop(32, dtype=torch.float16, channels_last=True)
    with feedline.Loader(dataset, batch_size=8, transform=t, seed=1, num_threads=2) as loader:
        px, py = next(iter(loader))
        px = px.clone()
    mix = ft.MixUp(alpha=1.0, num_classes=4)
    with feedline.Loader(dataset, batch_size=8, seed=1, num_threads=2,
                         transform=ft.random_resized_crop(32, dtype=torch.float16, channels_last=True),
                         batch_transform=mix) as loader:
        mx, my = next(iter(loader))
    p = _C.draw_batch_mix([mix.op()], 32, 32, seed=1, epoch=0, stream_id=0)
    want_x, want_y = v2_mixup(px.permute(0, 3, 1, 2), py, p.lam, 4)
    assert torch.equal(mx.permute(0, 3, 1, 2), want_x) and torch.equal(my, want_y)


def test_loader_names_the_sample_whose_label_is_out_of_range(dataset):
    with feedline.Loader(dataset, batch_size=96, seed=1, num_threads=2, transform=ft.random_resized_crop(16),
                         batch_transform=ft.MixUp(alpha=1.0, num_classes=2)) as loader:
        with pytest.raises(ValueError, match=r"label [23] of sample \d+ of the batch \(sample id \d+\)"):
            next(iter(loader))


def test_batch_transform_refusals(dataset):
    with pytest.raises(TypeError, match="batch_transform must be"):
        feedline.Loader(dataset, batch_size=8, batch_transform=T.RandomErasing())
    with pytest.raises(ValueError, match="images, labels"):
        feedline.Loader(dataset, batch_size=8, fields={"image": "jpg;png;jpeg", "label": "cls"},
                        batch_transform=ft.MixUp(alpha=1.0, num_classes=4))


def test_batch_transform_after_python_members(dataset):
    """A split Compose (a Python member in the middle): the batch is still mixed, its layout read from its shape."""
    compose = T.Compose([T.RandomResizedCrop(32), T.Lambda(lambda img: img), T.ToTensor()])
    with feedline.Loader(dataset, batch_size=8, transform=compose, seed=2, num_threads=2) as loader:
        px, py = next(iter(loader))
        px, py = px.clone(), py.clone()
    mix = ft.CutMix(alpha=1.0, num_classes=4)
    with feedline.Loader(dataset, batch_size=8, transform=compose, seed=2, num_threads=2,
                         batch_transform=mix) as loader:
        assert loader.transform_source.chain is not None
        mx, my = next(iter(loader))
    p = _C.draw_batch_mix([mix.op()], 32, 32, seed=2, epoch=0, stream_id=0)
    want_x, want_y = v2_cutmix(px, py, (p.x1, p.y1, p.x2, p.y2), 4)
    assert torch.equal(mx, want_x) and torch.equal(my, want_y)
