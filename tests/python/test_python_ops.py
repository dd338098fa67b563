"""Python ops (docs/python_ops.md; python/bindings/python_op.cc): a Compose
with members feedline does not implement runs them in Python on the worker
threads, between a native prefix and a native suffix; map= and batch_map=;
determinism at any thread count and after a resume; errors with their
traceback; stats with GIL times.

Bounds are test_torchvision_translate.py's: against torchvision on the same
file, PSNR >= 30 dB per sample with the default DCT-scaled decode."""
import math
import sys
import threading

import numpy as np
import pytest
import torch
import torchvision.transforms as T
from PIL import Image

import feedline
from feedline.transforms import UnsupportedTransformError, translate

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


class FlipUD:
    """A deterministic user member that needs a PIL image."""

    def __call__(self, img):
        assert isinstance(img, Image.Image), type(img)
        return img.transpose(getattr(Image, "Transpose", Image).FLIP_TOP_BOTTOM)


class Noise:
    """A random user member on a tensor: draws from torch's global generator."""

    def __call__(self, x):
        assert isinstance(x, torch.Tensor), type(x)
        return (x + 0.05 * torch.rand(x.shape)).clamp(0, 1)


class Seen:
    """Records the type it is given (a global list: every worker appends)."""

    log = []

    def __init__(self, tag):
        self.tag = tag

    def __call__(self, x):
        Seen.log.append((self.tag, "pil" if isinstance(x, Image.Image) else type(x).__name__))
        return x


def to_255(x):
    m = torch.tensor(MEAN, dtype=torch.float64)[:, None, None]
    s = torch.tensor(STD, dtype=torch.float64)[:, None, None]
    return ((x.to(torch.float64) * s + m) * 255).numpy()


def psnr(a, b):
    mse = float(np.mean((a - b) ** 2))
    return float("inf") if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)


def batches_bytes(loader):
    return [(x.numpy().tobytes(), y.numpy().tobytes()) for x, y in loader]


def test_a_user_member_in_the_middle_matches_torchvision_per_sample(dataset):
    compose = T.Compose([T.Resize(72), T.CenterCrop(64), FlipUD(), T.ToTensor(), T.Normalize(MEAN, STD)])
    with feedline.Loader(dataset, batch_size=16, transform=compose, num_threads=2) as loader:
        tr = loader.transform_source
        assert tr is not None and tr.chain is not None and tr.chain.name == "python:FlipUD"
        assert [m.position for m in tr.python_members] == ["2"]
        samples = loader.samples
        got = torch.cat([x for x, _ in loader])
    assert got.shape == (96, 3, 64, 64) and got.dtype == torch.float32
    low = float("inf")
    for (path, _), a in zip(samples, got):
        ref = compose(Image.open(path).convert("RGB"))
        p = psnr(to_255(a), to_255(ref))
        low = min(low, p)
        assert p >= 30.0, f"{path}: PSNR {p:.1f} dB"
    print(f"\nmin PSNR {low:.1f} dB over {len(samples)} samples")


def test_the_native_prefix_and_suffix_are_the_native_recipes_pixels(dataset):
    """Around a user member the native parts give the fused op's own values:
    the same Compose without the member, flipped, within float rounding."""
    kw = dict(batch_size=32, num_threads=2)
    with feedline.Loader(dataset, transform=T.Compose([T.Resize(72), T.CenterCrop(64), FlipUD(), T.ToTensor(),
                                                       T.Normalize(MEAN, STD)]), **kw) as a, \
            feedline.Loader(dataset, transform=T.Compose([T.Resize(72), T.CenterCrop(64), T.ToTensor(),
                                                          T.Normalize(MEAN, STD)]), **kw) as b:
        assert b.transform_source.chain is None  # fully native
        xa = torch.cat([x for x, _ in a])
        xb = torch.cat([x for x, _ in b])
    assert torch.allclose(xa, xb.flip(-2), atol=1e-4)


def test_members_get_a_pil_image_before_the_conversion_and_a_tensor_after(dataset):
    compose = T.Compose([T.RandomResizedCrop(48), Seen("a"), T.ToTensor(), Seen("b"), T.Normalize(MEAN, STD)])
    Seen.log.clear()
    compose(Image.new("RGB", (80, 60)))
    expected = sorted(set(Seen.log))
    assert expected == [("a", "pil"), ("b", "Tensor")]
    Seen.log.clear()
    with feedline.Loader(dataset, batch_size=32, transform=compose, num_threads=2) as loader:
        images = torch.cat([x for x, _ in loader])
    assert images.shape == (96, 3, 48, 48) and images.dtype == torch.float32
    assert sorted(set(Seen.log)) == expected
    # Once per sample, once more for the first sample (run at creation); the
    # workers may also have started the next epoch before the loader closed.
    assert len(Seen.log) >= 2 * (96 + 1)


def test_a_tensor_returned_last_is_the_output_as_is(dataset):
    compose = T.Compose([T.CenterCrop(10), T.Resize((40, 30)), T.ToTensor(), lambda x: x[:2].to(torch.float64)])
    tr = translate(compose, strict=False)
    # CenterCrop is the native prefix (a crop of the decoded image); the rest runs in Python
    assert tr.chain is not None and tr.chain.name == "python:Resize+ToTensor+<lambda>"
    with feedline.Loader(dataset, batch_size=8, transform=compose, num_threads=2) as loader:
        x, y = next(iter(loader))
    assert x.shape == (8, 2, 40, 30) and x.dtype == torch.float64
    path = loader.samples[0][0]
    assert torch.equal(x[0], compose(Image.open(path).convert("RGB")))


def test_a_pil_image_at_the_end_is_refused_at_creation(dataset):
    with pytest.raises(feedline.Error, match="learn the output shape.*cannot be batched"):
        feedline.Loader(dataset, batch_size=8, transform=T.Compose([T.RandomResizedCrop(32), FlipUD()]))


def random_compose():
    return T.Compose([T.RandomResizedCrop(48), T.RandomPerspective(p=1.0), T.ToTensor(), Noise(),
                      T.Normalize(MEAN, STD)])


def test_torchvision_random_members_and_torch_rand_are_deterministic_at_any_thread_count(dataset):
    kw = dict(batch_size=8, shuffle=True, seed=5)
    runs = {}
    for threads in (1, 4):
        with feedline.Loader(dataset, transform=random_compose(), num_threads=threads, **kw) as loader:
            assert loader.transform_source.chain.name == "python:RandomPerspective+ToTensor+Noise"
            runs[threads] = [batches_bytes(loader) for _ in range(2)]  # two epochs
    assert runs[1] == runs[4]
    assert runs[1][0] != runs[1][1]  # another epoch draws other numbers
    with feedline.Loader(dataset, transform=random_compose(), num_threads=4, **{**kw, "seed": 6}) as other:
        assert batches_bytes(other) != runs[1][0]


def test_python_ops_leave_the_loops_generators_as_they_were(dataset):
    import random
    torch.manual_seed(123)
    random.seed(7)
    np.random.seed(8)
    with feedline.Loader(dataset, batch_size=32, transform=random_compose(), num_threads=4) as loader:
        for _ in loader:
            pass
    got = (torch.rand(3), random.random(), np.random.rand())
    torch.manual_seed(123)
    random.seed(7)
    np.random.seed(8)
    assert torch.equal(got[0], torch.rand(3)) and got[1] == random.random() and got[2] == np.random.rand()


def test_resume_mid_epoch_gives_the_same_remaining_batches(dataset):
    kw = dict(batch_size=8, shuffle=True, seed=2, num_threads=3)
    with feedline.Loader(dataset, transform=random_compose(), **kw) as full:
        everything = batches_bytes(full)
    with feedline.Loader(dataset, transform=random_compose(), **kw) as first:
        it = iter(first)
        head = [tuple(t.numpy().tobytes() for t in next(it)) for _ in range(5)]
        state = first.state_dict()
    assert head == everything[:5]
    with feedline.Loader(dataset, transform=random_compose(), **{**kw, "num_threads": 1}) as resumed:
        resumed.load_state_dict(state)
        assert batches_bytes(resumed) == everything[5:]


class AlwaysFails:
    def __call__(self, img):
        raise ValueError("this member always fails")


class FailsAfterFirst:
    def __init__(self):
        self.calls = 0

    def __call__(self, img):
        self.calls += 1
        if self.calls > 1:
            raise KeyError("no luck")
        return img


class Flaky:
    """Fails for about a quarter of the samples, by a draw from torch's
    generator: which ones depends on (seed, epoch, sample) only."""

    def __call__(self, img):
        if torch.rand(1).item() < 0.25:
            raise RuntimeError("flaky member")
        return img


def test_a_raising_member_names_sample_op_and_traceback(dataset):
    compose = T.Compose([T.RandomResizedCrop(32), AlwaysFails(), T.ToTensor()])
    with pytest.raises(feedline.Error) as e:
        feedline.Loader(dataset, batch_size=8, transform=compose)
    msg = str(e.value)
    assert "python:AlwaysFails" in msg and "ValueError: this member always fails" in msg
    assert "Traceback (most recent call last)" in msg and "test_python_ops.py" in msg
    assert "file '" in msg and "img_00000000" in msg, msg  # the sample's file
    # Raised during the epoch (the first sample, at creation, passed): the error stops it.
    compose = T.Compose([T.RandomResizedCrop(32), FailsAfterFirst(), T.ToTensor()])
    with feedline.Loader(dataset, batch_size=8, transform=compose, num_threads=2) as loader:
        with pytest.raises(feedline.Error) as e:
            list(loader)
    msg = str(e.value)
    assert "python:FailsAfterFirst" in msg and "KeyError: 'no luck'" in msg and "Traceback" in msg
    assert "key '" in msg
    if sys.version_info >= (3, 11):  # the member's position, as an exception note
        assert "in transform member" in msg and "at position 1" in msg


def test_raising_samples_are_skipped_and_counted_identically_at_any_thread_count(dataset):
    compose = T.Compose([T.RandomResizedCrop(32), Flaky(), T.ToTensor()])
    results = {}
    for threads in (1, 4):
        with feedline.Loader(dataset, batch_size=8, transform=compose, num_threads=threads, max_errors=90) as loader:
            got = batches_bytes(loader)
            errors = loader.stats()["errors"]
        results[threads] = got, errors["total"], errors["skipped"]
        assert 0 < errors["skipped"] < 96
        assert sum(len(y) // 8 for _, y in got) == 96 - errors["skipped"]  # int64 labels
        assert errors["by_reason"] == {"python:Flaky/Unknown": errors["skipped"]}
        assert all("RuntimeError: flaky member" in line and "Traceback" in line for line in errors["log"])
    assert results[1] == results[4]


class VaryingSize:
    def __call__(self, img):
        return img.resize((24, 24)) if torch.rand(1).item() < 0.5 else img


def test_another_shape_than_the_first_samples_is_a_sample_error_naming_both(dataset):
    compose = T.Compose([T.RandomResizedCrop(32), VaryingSize(), T.ToTensor()])
    with feedline.Loader(dataset, batch_size=8, transform=compose, max_errors=96) as loader:
        shapes = {tuple(x.shape[1:]) for x, _ in loader}
        errors = loader.stats()["errors"]
    assert len(shapes) == 1 and errors["skipped"] > 0
    line = errors["log"][0]
    assert "python:VaryingSize returned a PIL image" in line and "learned from the first sample" in line
    assert "24x24" in line and "32x32" in line


def test_strict_refuses_python_members_naming_them(dataset):
    compose = T.Compose([T.RandomResizedCrop(32), FlipUD(), T.ToTensor(), T.RandomVerticalFlip()])
    with pytest.raises(UnsupportedTransformError) as e:
        feedline.Loader(dataset, batch_size=8, transform=compose, strict=True)
    assert [(m.position, m.member.split("(")[0].split(" ")[0]) for m in e.value.members] == \
        [("1", "<test_python_ops.FlipUD"), ("3", "RandomVerticalFlip")]
    assert "strict=True" in str(e.value)


def test_stats_name_python_ops_with_gil_times(dataset):
    compose = T.Compose([T.RandomResizedCrop(32), FlipUD(), T.ToTensor(), T.Normalize(MEAN, STD)])
    with feedline.Loader(dataset, batch_size=16, transform=compose, num_threads=2) as loader:
        for _ in loader:
            pass
        ops = {op["name"]: op for op in loader.stats()["ops"]}
    assert list(ops) == ["read", "decode_transform", "python:FlipUD", "to_tensor", "label"], list(ops)
    py = ops["python:FlipUD"]
    assert py["python"] is True and py["items"] >= 96  # workers may have started the next epoch
    assert py["gil_held_s"] > 0 and py["gil_wait_s"] >= 0 and py["gil_held_s"] <= py["busy_s"]
    assert all(op["python"] is False and "gil_held_s" not in op
               for name, op in ops.items() if name != "python:FlipUD")


def test_map_runs_per_sample_with_learned_shapes(dataset):
    def crop_and_shift(sample):
        return {"image": sample["image"][:, :16, :20].clone(), "label": sample["label"] + 10}

    kw = dict(batch_size=16, transform=feedline.transforms.imagenet_eval(32, 40), num_threads=2)
    with feedline.Loader(dataset, **kw) as plain, feedline.Loader(dataset, map=crop_and_shift, **kw) as mapped:
        a = [(x, y) for x, y in plain]
        b = [(x, y) for x, y in mapped]
        ops = mapped.stats()["ops"]
    assert ops[-1]["name"] == "python:map" and ops[-1]["python"] is True and ops[-1]["gil_held_s"] > 0
    for (x, y), (mx, my) in zip(a, b):
        assert mx.shape == (len(x), 3, 16, 20) and torch.equal(mx, x[:, :, :16, :20])
        assert torch.equal(my, y + 10) and my.dtype == torch.int64


def test_map_shape_mismatch_and_wrong_keys_are_sample_errors(dataset):
    def by_label(sample):  # the first sample is of class 0
        n = 8 if sample["label"] == 1 else 16
        return {"image": sample["image"][:, :n], "label": sample["label"]}

    kw = dict(batch_size=16, transform=feedline.transforms.imagenet_eval(32, 40))
    with feedline.Loader(dataset, map=by_label, max_errors=96, **kw) as loader:
        labels = torch.cat([y for _, y in loader])
        errors = loader.stats()["errors"]
    assert 1 not in labels.tolist() and errors["skipped"] == 24  # 96 images in 4 classes
    assert "'image' as float32 [3, 8, 32]" in errors["log"][0] and "float32 [3, 16, 32]" in errors["log"][0]
    with pytest.raises(feedline.Error, match="(?s)python:map.*on this loader it must return.*use fields="):
        feedline.Loader(dataset, map=lambda s: {"image": s["image"]}, **kw)


def test_map_with_fields_gets_the_sample_fields(dataset):
    def add(sample):
        assert isinstance(sample["label"], int) and isinstance(sample["image"], torch.Tensor)
        return {"image": sample["image"] * 0 + sample["label"], "label": sample["label"]}

    with feedline.Loader(dataset, batch_size=32, fields={"image": "jpg", "label": "cls"}, map=add,
                         transform=feedline.transforms.imagenet_eval(16, 20)) as loader:
        for batch in loader:
            assert torch.equal(batch["image"][:, 0, 0, 0], batch["label"].float())


def captioned_tar(path, n=12):
    """A WebDataset tar of n samples: jpg, cls, txt (a caption of i+1 words), json."""
    import io
    import json

    from tar_samples import write_tar
    rng = np.random.default_rng(5)
    samples = []
    for i in range(n):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 255, (24, 28, 3), dtype=np.uint8)).save(buf, "JPEG", quality=90)
        caption = " ".join(f"w{i}" for _ in range(i + 1))
        samples.append((f"s{i:03d}", {"jpg": buf.getvalue(), "cls": str(i % 3).encode(), "txt": caption.encode(),
                                      "json": json.dumps({"i": i}).encode()}))
    write_tar(path, samples)
    return str(path)


WDS_FIELDS = {"image": "jpg", "label": "cls", "caption": "txt", "meta": "json"}


def test_a_map_that_adds_fields_gets_them_collated_like_the_others(tmp_path):
    # Issue 40: a map returning one more key failed at creation ("running the
    # first sample at creation to learn the output shape").
    tar = captioned_tar(tmp_path / "a.tar")

    def add(sample):
        words = sample["caption"].split()
        return {**sample, "n_words": len(words), "shout": sample["caption"].upper(), "ratio": len(words) / 2,
                "first": {"word": words[0]}}

    kw = dict(batch_size=4, fields=WDS_FIELDS, transform=feedline.transforms.imagenet_eval(16, 20), shuffle=False)
    with feedline.Loader(tar, map=add, num_threads=2, **kw) as loader:
        batches = list(loader)
    assert [list(b) for b in batches[:1]] == [["image", "label", "caption", "meta", "n_words", "shout", "ratio",
                                               "first"]]
    n_words = torch.cat([b["n_words"] for b in batches])
    assert n_words.dtype == torch.int64 and n_words.tolist() == list(range(1, 13))  # ints: an int64 tensor
    ratio = torch.cat([b["ratio"] for b in batches])
    assert ratio.dtype == torch.float64 and ratio.tolist() == [(i + 1) / 2 for i in range(12)]
    shout = [s for b in batches for s in b["shout"]]  # strings: a list per batch
    assert shout == [" ".join(f"W{i}" for _ in range(i + 1)) for i in range(12)]
    assert [f for b in batches for f in b["first"]] == [{"word": f"w{i}"} for i in range(12)]
    assert [m["i"] for b in batches for m in b["meta"]] == list(range(12))
    assert batches[0]["image"].shape == (4, 3, 16, 16) and batches[0]["label"].tolist() == [0, 1, 2, 0]


def test_a_map_that_drops_and_changes_fields_and_is_the_same_at_any_thread_count(tmp_path):
    tar = captioned_tar(tmp_path / "a.tar")

    def tokens(sample):  # the caption becomes fixed-length token ids; meta is dropped
        ids = [len(w) + k for k, w in enumerate(sample["caption"].split()[:4])]
        return {"image": sample["image"], "label": sample["label"],
                "caption": torch.tensor(ids + [0] * (4 - len(ids)), dtype=torch.int32)}

    kw = dict(batch_size=4, fields=WDS_FIELDS, transform=feedline.transforms.imagenet_eval(16, 20), seed=1)
    runs = []
    for threads in (1, 3):
        with feedline.Loader(tar, map=tokens, num_threads=threads, **kw) as loader:
            runs.append(list(loader))
    for a, b in zip(*runs):
        assert list(a) == ["image", "label", "caption"]
        assert a["caption"].dtype == torch.int32 and a["caption"].shape == (4, 4)
        assert torch.equal(a["caption"], b["caption"]) and torch.equal(a["image"], b["image"])


def test_an_error_inside_a_field_adding_map_names_the_sample_the_op_and_the_exception(tmp_path):
    tar = captioned_tar(tmp_path / "a.tar")

    def picky(sample):
        if sample["meta"]["i"] == 5:
            raise KeyError("no such word")
        out = {**sample, "n": len(sample["caption"])}
        if sample["meta"]["i"] == 7:
            del out["n"]  # a sample that returns other fields than the first
            out["m"] = 1
        return out

    kw = dict(batch_size=4, fields=WDS_FIELDS, transform=feedline.transforms.imagenet_eval(16, 20), shuffle=False)
    with feedline.Loader(tar, map=picky, max_errors=4, num_threads=2, **kw) as loader:
        got = [m["i"] for b in loader for m in b["meta"]]
        log = loader.stats()["errors"]["log"]
    assert got == [i for i in range(12) if i not in (5, 7)]
    [boom] = [e for e in log if "s005" in e]
    assert "python:map" in boom and "KeyError" in boom and "no such word" in boom
    [other] = [e for e in log if "s007" in e]
    assert "python:map" in other and "missing ['n'], new ['m']" in other
    with feedline.Loader(tar, map=picky, num_threads=1, **kw) as loader:
        with pytest.raises(feedline.Error, match="(?s)s005.*python:map.*KeyError.*no such word"):
            list(loader)


def test_batch_map_runs_on_a_background_thread_and_resumes(dataset):
    threads = set()

    def double(pair):
        threads.add(threading.current_thread().name)
        x, y = pair
        return x * 2, y

    kw = dict(batch_size=8, shuffle=True, seed=1, transform=feedline.transforms.imagenet_train(24), num_threads=2)
    with feedline.Loader(dataset, **kw) as plain:
        ref = [(x * 2).numpy().tobytes() for x, _ in plain]
    with feedline.Loader(dataset, batch_map=double, **kw) as loader:
        it = iter(loader)
        head = [next(it)[0].numpy().tobytes() for _ in range(4)]
        state = loader.state_dict()
        rest = [x.numpy().tobytes() for x, _ in it]
    assert head + rest == ref and threads == {"feedline-batch-map"}
    with feedline.Loader(dataset, batch_map=double, **kw) as resumed:
        resumed.load_state_dict(state)
        assert [x.numpy().tobytes() for x, _ in resumed] == ref[4:]


def test_batch_map_errors_reach_the_loop(dataset):
    def boom(pair):
        raise ZeroDivisionError("in batch_map")

    with feedline.Loader(dataset, batch_size=8, batch_map=boom, transform=feedline.transforms.imagenet_eval(16, 20)) \
            as loader:
        with pytest.raises(ZeroDivisionError, match="in batch_map"):
            list(loader)


def test_exiting_with_loaders_still_running_python_ops_is_clean(dataset, tmp_path):
    # Two loaders left open mid-epoch, their workers inside a Python op that
    # spins holding the GIL: the interpreter exits cleanly (atexit closes
    # them before finalisation), with no abort from a worker thread.
    import subprocess
    script = tmp_path / "exit.py"
    script.write_text(
        "import sys, time\n"
        "import torchvision.transforms as T\n"
        "import feedline\n"
        "class Spin:\n"
        "    def __call__(self, img):\n"
        "        t = time.perf_counter()\n"
        "        while time.perf_counter() - t < 0.003:\n"
        "            pass\n"
        "        return img\n"
        "tf = T.Compose([T.Resize(32), T.CenterCrop(32), Spin(), T.ToTensor()])\n"
        "a = feedline.Loader(sys.argv[1], batch_size=8, transform=tf, num_threads=2)\n"
        "for x in a:\n"
        "    break\n"
        "b = feedline.Loader(sys.argv[1], batch_size=8, transform=tf, num_threads=2)\n"
        "next(iter(b))\n"
        "print('done')\n")
    r = subprocess.run([sys.executable, str(script), str(dataset)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "done" and "terminate" not in r.stderr
