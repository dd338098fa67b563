"""Custom C++ ops from Python (docs/custom_ops.md): the example library
(examples/custom_op) loaded with feedline.load_ops, named in fields= as
"op:<name>(<params>):<parts>", its values checked against numpy on the
pixels and bytes the test wrote; parse and plan errors name the op."""
import io
import pathlib
import tarfile

import numpy as np
import pytest
from PIL import Image

import feedline
from feedline import _fields

# build/python/feedline/_C*.so -> build/examples/custom_op/
LIBRARY = pathlib.Path(feedline._C.__file__).resolve().parents[2] / "examples" / "custom_op" / \
    "libfeedline_example_ops.so"


@pytest.fixture(scope="module")
def ops():
    if not LIBRARY.exists():
        pytest.skip(f"the example library is not built ({LIBRARY}): cmake --build build --target "
                    "feedline_example_ops")
    names = feedline.load_ops(str(LIBRARY))
    assert names == ["byte_histogram", "mask_fraction"]
    return names


def _png(a):
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format="PNG")
    return buf.getvalue()


def _write_tar(path, n, seed=7):
    rng = np.random.default_rng(seed)
    expected = []
    with tarfile.open(path, "w") as tar:
        for i in range(n):
            h, w = int(rng.integers(3, 30)), int(rng.integers(5, 40))
            mode = i % 2  # gray masks and colour ones
            mask = rng.integers(0, 256, size=(h, w) if mode == 0 else (h, w, 3), dtype=np.uint8)
            blob = rng.integers(0, 256, size=int(rng.integers(50, 500)), dtype=np.uint8).tobytes()
            rgb = mask if mask.ndim == 3 else np.repeat(mask[:, :, None], 3, axis=2)
            fraction = float((rgb >= 100).any(axis=2).mean())
            hist = np.bincount(np.frombuffer(blob, np.uint8).astype(np.int64) * 8 // 256, minlength=8)
            expected.append((np.float32(fraction), hist))
            for ext, data in (("seg.png", _png(mask)), ("bin", blob), ("cls", str(i).encode())):
                info = tarfile.TarInfo(f"s{i:04d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return expected


def test_the_example_ops_compute_what_numpy_computes(ops, tmp_path):
    assert set(ops) <= set(feedline.registered_ops())
    expected = _write_tar(tmp_path / "masks.tar", 17)
    loader = feedline.Loader(str(tmp_path / "masks.tar"), batch_size=4, num_threads=3, fields={
        "label": "cls",
        "area": "op:mask_fraction(threshold=100):seg.png",
        "hist": "op:byte_histogram( bins = 8 ):bin"})
    seen = 0
    for batch in loader:
        assert set(batch) == {"label", "area", "hist"}
        assert batch["hist"].shape[1:] == (8,)
        for k, i in enumerate(batch["label"].tolist()):
            fraction, hist = expected[i]
            assert batch["area"][k].item() == fraction, i
            assert batch["hist"][k].tolist() == hist.tolist(), i
            seen += 1
    assert seen == 17


def test_op_field_syntax_is_parsed_and_misuse_is_named():
    (f,) = _fields.parse({"a": "op:mask_fraction(threshold=128, x = y ):seg.png;mask.png"})
    assert (f.kind, f.op, f.params, f.parts) == ("op", "mask_fraction", {"threshold": "128", "x": "y"},
                                                 ["seg.png", "mask.png"])
    (g,) = _fields.parse({"a": "op:byte_histogram:bin"})
    assert (g.op, g.params, g.parts) == ("byte_histogram", {}, ["bin"])
    for value, why in [("op:mask_fraction(threshold=1)", "expected 'op:<name>"),
                       ("op:mask_fraction(threshold):seg.png", "expected key=value"),
                       ("op:m(a=1,a=2):seg.png", "given twice"),
                       ("op:m(a=1): ", "names no parts")]:
        with pytest.raises(ValueError, match=r".*" + why.replace("(", r"\(")):
            _fields.parse({"a": value})


def test_plan_errors_name_the_op_and_the_field(ops, tmp_path):
    _write_tar(tmp_path / "m.tar", 2)
    with pytest.raises(feedline.NotFoundError, match="op 'no_such_op' for field 'a'.*registered: .*'mask_fraction'"):
        feedline.Loader(str(tmp_path / "m.tar"), batch_size=2, fields={"a": "op:no_such_op:seg.png"})
    with pytest.raises(feedline.InvalidArgumentError,
                       match=r"op 'mask_fraction' for field 'a': parameter 'threshold' is 256, outside \[0, 255\]"):
        feedline.Loader(str(tmp_path / "m.tar"), batch_size=2,
                        fields={"a": "op:mask_fraction(threshold=256):seg.png"})
    with pytest.raises(feedline.Error, match="registered already"):
        feedline.load_ops(str(LIBRARY))
    with pytest.raises(feedline.NotFoundError, match="cannot load"):
        feedline.load_ops(str(tmp_path / "nothing.so"))
