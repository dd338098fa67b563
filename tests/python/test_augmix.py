"""AugMix, native (issue 17; src/image/affine.cc draws it, the blend runs in
src/image/color_ops.cc; python/feedline/_pixel.py): its op set, bins and
signs against torchvision's own AugMix._augmentation_space, the blend of
fixed draws against torchvision's functional ops and the same float32 mix
on the photographs of tests/data/photos, the Beta, Dirichlet and depth
draws over many seeded samples, the translation of a Compose, and the
loader (same seed, same bytes at 1 and 3 threads).

Bound of the fixed-draw comparison (docs/augmentations.md): mean absolute
difference <= 1 on the 0-255 scale per image. The mix itself is torch's
float32 arithmetic, truncated, so only the chains' warps differ (BILINEAR:
a rounding flip on a few values, which a later Equalize or Posterize can
widen); draws without a warp are bit-exact. Measured figures print with -s.
"""
import collections
import math
import pathlib

import numpy as np
import pytest
import torch
import torchvision.transforms as T
from PIL import Image
from torchvision.transforms import InterpolationMode as IM
from torchvision.transforms import autoaugment as AA
from tv_steps import V2, needs_v2, step_magnitude, step_name

import feedline
import feedline.transforms as ft
from feedline import _C
from feedline.transforms import translate

ROOT = pathlib.Path(__file__).resolve().parents[2]
PHOTOS = ROOT / "tests" / "data" / "photos"


K = _C.PixelStepKind
WARPS = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate"}
# At bin 0 a shear or translation in x is the same step as in y (magnitude 0).
AMBIGUOUS_AT_0 = {"ShearX": "Shear0", "ShearY": "Shear0", "TranslateX": "Translate0", "TranslateY": "Translate0"}


def chw(path):
    return torch.from_numpy(np.array(Image.open(path).convert("RGB"))).permute(2, 0, 1).contiguous()


@pytest.fixture(scope="module")
def photos():
    return [(p.stem, chw(p)) for p in sorted(PHOTOS.iterdir()) if p.suffix in (".png", ".jpg")]


def draws(op, n, seed):
    return [_C.draw_pixel_steps([op], seed=seed, sample_id=i) for i in range(n)]


def split(steps):
    """(the original's weight, [(chain weight, [steps])]) of one AugMix draw."""
    assert steps[0].kind == K.MIX_BEGIN and steps[-1].kind == K.MIX_END
    chains = []
    for s in steps[1:-1]:
        if s.kind == K.MIX_CHAIN:
            chains.append((s.value, []))
        else:
            assert s.kind not in (K.MIX_BEGIN, K.MIX_END)
            chains[-1][1].append(s)
    return steps[0].value, chains


def diff(a, b):
    d = (a.to(torch.int16) - b.to(torch.int16)).abs()
    return d.float().mean().item(), int(d.max().item())


# ---- the op set, bins and signs ----

@pytest.mark.parametrize("all_ops", [True, False])
@pytest.mark.parametrize("severity", [3, 10])
def test_op_set_bins_and_signs_match_torchvisions_augmentation_space(all_ops, severity):
    tv = AA.AugMix(severity=severity, all_ops=all_ops)
    space = tv._augmentation_space(10, (224, 224))
    op = ft.AugMix(severity=severity, all_ops=all_ops).op()
    counts, values, signs = collections.Counter(), collections.defaultdict(set), collections.Counter()
    for steps in draws(op, 3000, seed=11):
        for _, chain in split(steps)[1]:
            for s in chain:
                name = step_name(s)
                if name in AMBIGUOUS_AT_0 and step_magnitude(s, (224, 224)) == 0:
                    counts[AMBIGUOUS_AT_0[name]] += 1  # bin 0 of X or Y: the same identity warp
                    continue
                counts[name] += 1
                mags, signed = space[name]
                if s.kind.name == "AFFINE" and not s.rotate and not s.corner_center:
                    bin_ = int(abs(s.translate_x or s.translate_y))  # translations hold +-bin
                    assert bin_ < severity, (name, bin_)
                    values[name].add(bin_)
                    m = step_magnitude(s, (224, 224))
                else:
                    m = step_magnitude(s, (224, 224))
                    if mags.ndim == 0:
                        assert m == 0.0
                        continue
                    table = mags.double()
                    atol = 1e-3 if name == "Solarize" else 1e-6  # v1's linspace(255, 0) vs v2's 255 * linspace(1, 0)
                    hit = torch.isclose(table, torch.tensor(abs(m) if signed else m, dtype=torch.float64),
                                        rtol=1e-6, atol=atol).nonzero().flatten().tolist()
                    assert hit and min(hit) < severity, (name, m, hit)
                    values[name].add(round(float(table[min(hit)]), 4))
                if signed and m != 0:
                    signs[(name, m > 0)] += 1
                elif not signed:
                    assert m >= 0, (name, m)
    assert set(counts) - {"Shear0", "Translate0"} == set(space), set(counts) ^ set(space)
    n = sum(counts.values())
    for name, (mags, signed) in space.items():
        share = counts[name] / n
        # sd ~0.002 over ~18000 ops; shears and translations at bin 0 are counted as a pair.
        want = 1 / len(space) * ((1 - 1 / severity) if name in AMBIGUOUS_AT_0 else 1)
        assert abs(share - want) < 0.02, (name, share, want)
        if mags.ndim == 0:
            continue
        if name in ("TranslateX", "TranslateY"):
            assert values[name] == set(range(1, severity)), (name, values[name])
        else:
            table = {round(float(v), 4) for v in mags[:severity].double()}
            assert values[name] == (table - {0.0} if name in AMBIGUOUS_AT_0 else table), (name, values[name])
        if signed:
            pos, neg = signs[(name, True)], signs[(name, False)]
            assert pos > 0.4 * (pos + neg) and neg > 0.4 * (pos + neg), (name, pos, neg)
    for pair in ("Shear", "Translate"):
        share = (counts[pair + "X"] + counts[pair + "Y"] + counts[pair + "0"]) / n
        assert abs(share - 2 / len(space)) < 0.02, (pair, share)


# ---- the blend of fixed draws against torchvision ----

def torchvision_augmix(img, m0, chains, fill):
    """torchvision's AugMix.forward with the draws given: its _apply_op for
    each chain op, and its float32 mix, converted with .to(uint8)."""
    h, w = img.shape[1:]
    mix = torch.tensor(m0, dtype=torch.float32) * img
    for weight, chain in chains:
        aug = img
        for s in chain:
            aug = AA._apply_op(aug, step_name(s), step_magnitude(s, (h, w)), interpolation=IM.BILINEAR, fill=fill)
        mix.add_(torch.tensor(weight, dtype=torch.float32) * aug)
    return mix.to(torch.uint8)


def fl(steps, img):
    return torch.from_numpy(_C.apply_pixel_steps(steps, img.numpy()))


def covering_draws(op, want, seed):
    """Drawn samples until every op name in `want` appears (in draw order)."""
    picked, seen = [], set()
    for i in range(2000):
        steps = _C.draw_pixel_steps([op], seed=seed, sample_id=i)
        names = {step_name(s) for _, chain in split(steps)[1] for s in chain}
        if names - seen or len(picked) < 3:
            picked.append(steps)
            seen |= names
        if seen >= want and len(picked) >= 3:
            return picked
    raise AssertionError(f"no draw of {want - seen} in 2000 samples")


@pytest.mark.parametrize("fill", [None, [20.0, 40.0, 60.0]], ids=["fillNone", "fill"])
def test_fixed_draws_equal_torchvisions_ops_and_float_mix(photos, fill):
    all13 = set(AA.AugMix()._augmentation_space(10, (8, 8)))
    op = ft.AugMix(severity=10, fill=fill).op()
    worst = (0.0, 0)
    for k, (pname, img) in enumerate(photos):
        for steps in covering_draws(op, all13, seed=20 + k):
            m0, chains = split(steps)
            got, want = fl(steps, img), torchvision_augmix(img, m0, chains, fill)
            assert got.shape == want.shape and got.dtype == torch.uint8
            mean, mx = diff(got, want)
            assert mean <= 1.0, (pname, [[step_name(s) for s in c] for _, c in chains], mean, mx)
            if not any(step_name(s) in WARPS for _, c in chains for s in c):
                assert mx == 0, (pname, [[step_name(s) for s in c] for _, c in chains], mx)
            worst = max(worst, (mean, mx))
    print(f"\nAugMix vs torchvision (fill {fill}): worst mean {worst[0]:.4f}, max {worst[1]}")


def test_given_weights_come_from_torchs_own_dirichlet(photos):
    """The weights as torchvision draws them (torch._sample_dirichlet in
    float32, the chains' scaled by m[1]) on feedline's chains: the same
    bytes where no warp runs."""
    img = dict(photos)["coffee"]
    torch.manual_seed(3)
    m = torch._sample_dirichlet(torch.tensor([1.0, 1.0]))
    w = torch._sample_dirichlet(torch.tensor([1.0] * 3)) * m[1]
    pool = {}  # a drawn step of each op, at a bin above 0
    for steps in draws(ft.AugMix().op(), 200, seed=4):
        for _, chain in split(steps)[1]:
            for s in chain:
                if step_name(s) not in WARPS and (s.kind.name in ("AUTOCONTRAST", "EQUALIZE") or s.value != 1.0):
                    pool.setdefault(step_name(s), s)
    names = [["Brightness", "Equalize"], ["Posterize", "Contrast", "Sharpness"], ["Solarize", "Color",
                                                                                  "AutoContrast"]]
    found = [[pool[n] for n in chain] for chain in names]
    steps = [_C.PixelStep(K.MIX_BEGIN, float(m[0]))]
    for weight, chain in zip(w.tolist(), found):
        steps += [_C.PixelStep(K.MIX_CHAIN, weight)] + chain
    steps.append(_C.PixelStep(K.MIX_END))
    want = torchvision_augmix(img, float(m[0]), list(zip(w.tolist(), found)), None)
    assert torch.equal(fl(steps, img), want)


def test_the_mix_truncates_like_torch():
    """0.5 * v + 0.5 * (255 - v) = 127.5 everywhere: torch's .to(uint8)
    truncates to 127 (rounding would give 128)."""
    img = torch.arange(3 * 5 * 7, dtype=torch.uint8).reshape(3, 5, 7) * 2
    steps = [_C.PixelStep(K.MIX_BEGIN, 0.5), _C.PixelStep(K.MIX_CHAIN, 0.5), _C.PixelStep(K.INVERT),
             _C.PixelStep(K.MIX_END)]
    assert torch.equal(fl(steps, img), torch.full_like(img, 127))
    # Chains restart from the original: invert then identity is 0.25 * (255 - v) + 0.75 * v.
    steps = [_C.PixelStep(K.MIX_BEGIN, 0.5), _C.PixelStep(K.MIX_CHAIN, 0.25), _C.PixelStep(K.INVERT),
             _C.PixelStep(K.MIX_CHAIN, 0.25), _C.PixelStep(K.MIX_END)]
    want = (0.5 * img.float() + 0.25 * (255 - img).float() + 0.25 * img.float()).to(torch.uint8)
    assert torch.equal(fl(steps, img), want)


@pytest.mark.parametrize("steps,reason", [
    ([(K.MIX_CHAIN, 0.5), (K.MIX_END, 0)], "pixel step 0: MIX_CHAIN outside"),
    ([(K.MIX_BEGIN, 0.5), (K.MIX_CHAIN, 0.5)], "MIX_BEGIN without its MIX_END"),
    ([(K.MIX_BEGIN, 0.5), (K.INVERT, 0), (K.MIX_CHAIN, 0.5), (K.MIX_END, 0)], "pixel step 1: an op between"),
    ([(K.MIX_BEGIN, 0.5), (K.MIX_BEGIN, 0.5), (K.MIX_END, 0)], "pixel step 1: MIX_BEGIN inside a mix"),
    ([(K.MIX_END, 0)], "MIX_END without its MIX_BEGIN"),
    ([(K.MIX_BEGIN, float("nan")), (K.MIX_CHAIN, 0.5), (K.MIX_END, 0)], "weight must be finite"),
], ids=["chain-outside", "no-end", "op-before-chain", "nested", "end-alone", "nan-weight"])
def test_mix_steps_out_of_place_are_refused_naming_the_step(steps, reason):
    with pytest.raises(ValueError, match=reason):
        _C.apply_pixel_steps([_C.PixelStep(k, v) for k, v in steps], np.zeros((3, 4, 4), np.uint8))


# ---- the draws ----

def test_beta_dirichlet_and_depth_draws_follow_their_distributions():
    """Over 20,000 seeded samples: the original's weight m ~ Beta(1, 1)
    (mean 1/2, variance 1/12, uniform deciles), the chains' weights /
    (1 - m) ~ Dirichlet([1] * 3) (each mean 1/3, variance 1/18, summing to
    1), and each chain's depth uniform over 1..3; bounds of 5 sd."""
    n = 20000
    m0, weights, depths = [], [], collections.Counter()
    for steps in draws(ft.AugMix().op(), n, seed=7):
        m, chains = split(steps)
        assert len(chains) == 3 and 0 < m < 1
        m0.append(m)
        weights.append([c[0] / (1 - m) for c in chains])
        depths.update(len(c[1]) for c in chains)
    m0, weights = np.array(m0), np.array(weights)
    assert abs(m0.mean() - 0.5) < 5 * math.sqrt(1 / 12 / n)
    assert abs(m0.var() - 1 / 12) < 0.004  # sd of the variance ~0.0005
    deciles = np.percentile(m0, np.arange(10, 100, 10))
    assert np.abs(deciles - np.arange(0.1, 1.0, 0.1)).max() < 0.015
    assert np.abs(weights.sum(axis=1) - 1).max() < 1e-9
    for i in range(3):
        assert abs(weights[:, i].mean() - 1 / 3) < 5 * math.sqrt(1 / 18 / n), i
        assert abs(weights[:, i].var() - 1 / 18) < 0.003, i
    total = sum(depths.values())
    assert set(depths) == {1, 2, 3}
    for d in (1, 2, 3):
        assert abs(depths[d] / total - 1 / 3) < 5 * math.sqrt(2 / 9 / total), depths


@pytest.mark.parametrize("alpha,width", [(0.3, 4), (2.5, 2)])
def test_other_alphas_and_widths_keep_the_dirichlet_and_beta_moments(alpha, width):
    """Dirichlet([a] * k): mean 1/k, variance (1/k)(1 - 1/k)/(k a + 1);
    Beta(a, a): mean 1/2, variance 1/(4(2a + 1)). A fixed chain_depth
    fixes every chain's length."""
    n = 20000
    m0, weights = [], []
    for steps in draws(ft.AugMix(mixture_width=width, alpha=alpha, chain_depth=2).op(), n, seed=8):
        m, chains = split(steps)
        assert len(chains) == width and all(len(c[1]) == 2 for c in chains)
        m0.append(m)
        weights.append([c[0] / (1 - m) for c in chains])
    m0, weights = np.array(m0), np.array(weights)
    beta_var = 1 / (4 * (2 * alpha + 1))
    assert abs(m0.mean() - 0.5) < 5 * math.sqrt(beta_var / n)
    assert abs(m0.var() / beta_var - 1) < 0.05
    var = (1 / width) * (1 - 1 / width) / (width * alpha + 1)
    for i in range(width):
        assert abs(weights[:, i].mean() - 1 / width) < 5 * math.sqrt(var / n), i
        assert abs(weights[:, i].var() / var - 1) < 0.06, (i, weights[:, i].var(), var)


# ---- the translation, the callable, the loader ----

def _versions():
    return [("v1", T, AA)] + ([("v2", V2, V2)] if V2 is not None else [])


@pytest.mark.parametrize("ver", [v[0] for v in _versions()])
def test_augmix_in_a_compose_translates_natively_with_its_parameters(ver, dataset):
    M, P = dict((v[0], v[1]) for v in _versions())[ver], dict((v[0], v[2]) for v in _versions())[ver]
    tail = [T.PILToTensor()] if ver == "v1" else [V2.PILToTensor()]
    compose = M.Compose([M.RandomResizedCrop(48), P.AugMix(severity=5, mixture_width=2, chain_depth=2, alpha=0.5,
                                                           all_ops=False, fill=9)] + tail)
    tr = translate(compose)
    (op,) = tr.transform.pixel_ops
    assert op.kind == _C.PixelOpKind.AUG_MIX and op.interpolation == _C.WarpInterpolation.BILINEAR
    assert (op.severity, op.mixture_width, op.chain_depth, op.alpha, op.all_ops) == (5, 2, 2, 0.5, False)
    assert op.has_fill and op.fill == [9, 9, 9] and op.num_magnitude_bins == 10
    assert any(stage.startswith("pixel op AugMix") for _, _, stage in tr.members), tr.members
    with feedline.Loader(dataset, batch_size=8, transform=compose, seed=2, num_threads=2) as loader:
        assert loader.transform_source.chain is None
        x, _ = next(iter(loader))
        stats = loader.stats()
    assert x.shape == (8, 3, 48, 48) and x.dtype == torch.uint8
    # The stats show the native op at work and no Python op.
    assert any(o["name"] == "decode_transform" and o["items"] > 0 for o in stats["ops"]), stats["ops"]
    assert not any(o["python"] for o in stats["ops"]), stats["ops"]


@needs_v2
def test_v2_augmix_defaults_translate():
    op = translate(V2.Compose([V2.ToImage(), V2.RandomResizedCrop(48, antialias=True), V2.AugMix()])
                   ).transform.pixel_ops[0]
    assert (op.severity, op.mixture_width, op.chain_depth, op.alpha, op.all_ops) == (3, 3, -1, 1.0, True)


@pytest.mark.parametrize("member,param", [
    (AA.AugMix(interpolation=IM.BICUBIC), "interpolation BICUBIC"),
    (AA.AugMix(mixture_width=100), "mixture_width=100"),
    (AA.AugMix(chain_depth=65), "chain_depth=65"),
    (AA.AugMix(alpha=0.0), "alpha must be positive"),
])
def test_unsupported_augmix_parameters_are_named_and_run_in_python(member, param, dataset):
    compose = T.Compose([T.RandomResizedCrop(32), member, T.PILToTensor()])
    with pytest.raises(ft.UnsupportedTransformError, match=param):
        translate(compose)
    tr = translate(compose, strict=False)
    assert tr.chain is not None and [p.position for p in tr.python_members] == ["1"]
    # In Python, torchvision's own AugMix: BICUBIC fails on its tensors, alpha=0 in its Dirichlet, and 65
    # ops a chain are slow; 100 chains of 1..3 ops on 32 x 32 pixels run.
    if param.startswith("mixture_width"):
        with feedline.Loader(dataset, batch_size=4, transform=compose, seed=1, num_threads=2) as loader:
            x, _ = next(iter(loader))
            assert any(o["python"] for o in loader.stats()["ops"])
        assert x.shape == (4, 3, 32, 32) and x.dtype == torch.uint8


def test_callable_augmix_returns_a_uint8_chw_tensor(photos):
    img = dict(photos)["chelsea"][:, :53, :37].contiguous()
    torch.manual_seed(0)
    a = ft.AugMix()(img)
    assert a.dtype == torch.uint8 and a.shape == img.shape and not torch.equal(a, img)
    torch.manual_seed(0)
    assert torch.equal(a, ft.AugMix()(img))
    assert "AugMix(severity=3, mixture_width=3" in repr(ft.AugMix())
    with pytest.raises(TypeError, match="uint8 tensor"):
        ft.AugMix()(img.float())
    with pytest.raises(ValueError, match=r"severity must be between \[1, 10\]"):
        ft.AugMix(severity=11)
    with pytest.raises(ValueError, match="mixture_width=0"):
        ft.AugMix(mixture_width=0)
    with pytest.raises(ValueError, match="alpha must be positive"):
        ft.AugMix(alpha=-1)
    pil = Image.fromarray(img.permute(1, 2, 0).numpy())
    assert ft.AugMix()(pil).size == pil.size


def test_loader_with_augmix_same_seed_same_bytes_at_1_and_3_threads(dataset):
    compose = T.Compose([T.RandomResizedCrop(48), T.RandomHorizontalFlip(), AA.AugMix(), T.PILToTensor()])
    out = []
    for threads in (1, 3):
        with feedline.Loader(dataset, batch_size=16, transform=compose, seed=9, num_threads=threads) as loader:
            assert loader.transform_source.chain is None  # all native
            out.append(torch.cat([x for x, _ in loader]))
    assert torch.equal(out[0], out[1])
    plain = T.Compose([T.RandomResizedCrop(48), T.RandomHorizontalFlip(), T.PILToTensor()])
    with feedline.Loader(dataset, batch_size=16, transform=plain, seed=9, num_threads=2) as loader:
        base = torch.cat([x for x, _ in loader])
    assert not torch.equal(base, out[0])  # AugMix ran


def test_fused_path_equals_the_drawn_steps_on_the_resampled_pixels():
    """Decode + resize + AugMix in the fused op (the blend before the output
    conversion, float32 normalised and uint8) against the same draws applied
    one by one to the plain resample."""
    for normalize in (False, True):
        tail = [T.PILToTensor()] if not normalize else [T.ToTensor(), T.Normalize((0.5,) * 3, (0.25,) * 3)]
        t = translate(T.Compose([T.Resize((72, 96)), AA.AugMix(all_ops=True)] + tail)).transform
        plain = translate(T.Compose([T.Resize((72, 96)), T.PILToTensor()])).transform
        for path in sorted(PHOTOS.glob("*.png")):
            data = path.read_bytes()
            for seed in range(3):
                got = np.frombuffer(_C.transform_image(data, t, seed=seed),
                                    dtype=np.float32 if normalize else np.uint8).reshape(3, 72, 96)
                base = np.frombuffer(_C.transform_image(data, plain), dtype=np.uint8).reshape(3, 72, 96).copy()
                want = _C.apply_pixel_steps(_C.draw_pixel_steps(t.pixel_ops, seed=seed), base)
                if normalize:
                    want = (want.astype(np.float32) / 255 - 0.5) / 0.25
                    np.testing.assert_allclose(got, want, atol=1e-5, err_msg=f"{path.name} {seed}")
                else:
                    assert np.array_equal(got, want), (path.name, seed)
