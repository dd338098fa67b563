"""The formats beyond JPEG and PNG (WebP, TIFF, GIF, BMP, PNM) against PIL:
feedline's full decode of each file must equal Image.open(p).convert("RGB")
exactly. Every format here is lossless except lossy WebP, which both sides
decode with the same libwebp, so it is held to exact equality too.

The full decode is read through the CLI's fused op (`image transform`):
square crops that tile the image, resized to their own size (an identity
resample), uint8 HWC, unnormalised. That also checks the op's crop of a
whole-decoded image.

Where PIL's conversion is not what we do (16-bit gray: PIL clips to 255,
we scale), the expectation is computed from PIL's samples and documented
in docs/image.md.
"""
import io
import struct
import subprocess

import numpy as np
import pytest
from PIL import Image


def run(cmd, check=True):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} failed: {proc.stderr}")
    return proc


def info(feedline_bin, path):
    out = run([feedline_bin, "image", "info", str(path)]).stdout.split()
    w, h = map(int, out[1].split("x"))
    return out[0], w, h


def feedline_rgb(feedline_bin, tmp_path, path):
    """The whole image as feedline decodes it, HxWx3 uint8."""
    _, w, h = info(feedline_bin, path)
    s = min(w, h)
    xs = sorted({min(x, w - s) for x in range(0, w, s)})
    ys = sorted({min(y, h - s) for y in range(0, h, s)})
    img = np.zeros((h, w, 3), np.uint8)
    raw = tmp_path / "tile.raw"
    for y in ys:
        for x in xs:
            run([feedline_bin, "image", "transform", str(path), str(raw), "--recipe", "train", "--size", str(s),
                 "--crop", f"{x},{y},{s},{s}", "--dtype", "uint8", "--layout", "hwc", "--no-normalize",
                 "--no-dct-scaling"])
            img[y:y + s, x:x + s] = np.fromfile(raw, np.uint8).reshape(s, s, 3)
    return img


def pil_rgb(path):
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def noise(w, h, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def smooth(w, h):
    """A gradient with some texture: lossy codecs keep their data here."""
    y, x = np.mgrid[0:h, 0:w]
    r = (x * 255 // max(w - 1, 1)).astype(np.uint8)
    g = (y * 255 // max(h - 1, 1)).astype(np.uint8)
    b = ((x * 7 + y * 13) % 256).astype(np.uint8)
    return np.stack([r, g, b], -1)


def rgba(w, h):
    a = noise(w, h, 1)
    alpha = np.random.default_rng(2).integers(0, 256, (h, w, 1), dtype=np.uint8)
    alpha[0, :5] = 0  # fully transparent pixels keep their colour in the file
    return Image.fromarray(np.concatenate([a, alpha], -1), "RGBA")


def palette_image(w, h, colors=16):
    return Image.fromarray(noise(w, h)).quantize(colors)


W, H = 41, 27  # odd, non-square: row strides and padding matter


def write(tmp_path, name, save):
    p = tmp_path / name
    save(p)
    return p


# name -> function writing the file at a path
CASES = {
    # WebP
    "webp_lossless_rgb": lambda p: Image.fromarray(noise(W, H)).save(p, "WEBP", lossless=True),
    "webp_lossless_rgba": lambda p: rgba(W, H).save(p, "WEBP", lossless=True, exact=True),
    "webp_lossy_rgb": lambda p: Image.fromarray(smooth(W, H)).save(p, "WEBP", quality=80),
    "webp_lossy_rgba": lambda p: rgba(W, H).save(p, "WEBP", quality=70),
    "webp_lossy_gray": lambda p: Image.fromarray(smooth(W, H)).convert("L").save(p, "WEBP", quality=90),
    # TIFF
    "tiff_rgb_raw": lambda p: Image.fromarray(noise(W, H)).save(p, "TIFF"),
    "tiff_rgb_lzw": lambda p: Image.fromarray(noise(W, H)).save(p, "TIFF", compression="tiff_lzw"),
    "tiff_rgb_deflate": lambda p: Image.fromarray(noise(W, H)).save(p, "TIFF", compression="tiff_adobe_deflate"),
    "tiff_rgb_packbits": lambda p: Image.fromarray(smooth(W, H)).save(p, "TIFF", compression="packbits"),
    "tiff_rgba": lambda p: rgba(W, H).save(p, "TIFF", compression="tiff_lzw"),
    "tiff_gray": lambda p: Image.fromarray(noise(W, H)).convert("L").save(p, "TIFF"),
    "tiff_palette": lambda p: palette_image(W, H).save(p, "TIFF"),
    "tiff_bilevel": lambda p: Image.fromarray(noise(W, H)).convert("1").save(p, "TIFF"),
    "tiff_bilevel_g4": lambda p: Image.fromarray(noise(W, H)).convert("1").save(p, "TIFF", compression="group4"),
    # GIF
    "gif_palette": lambda p: palette_image(W, H).save(p, "GIF", interlace=False),
    "gif_interlaced": lambda p: palette_image(W, H, 200).save(p, "GIF", interlace=True),
    "gif_gray": lambda p: Image.fromarray(noise(W, H)).convert("L").save(p, "GIF"),
    "gif_transparent": lambda p: palette_image(W, H).save(p, "GIF", transparency=3),
    "gif_animated": lambda p: palette_image(W, H).save(
        p, "GIF", save_all=True, append_images=[palette_image(W, H, 8).rotate(90)], duration=100),
    # BMP
    "bmp_rgb": lambda p: Image.fromarray(noise(W, H)).save(p, "BMP"),
    "bmp_gray": lambda p: Image.fromarray(noise(W, H)).convert("L").save(p, "BMP"),
    "bmp_palette": lambda p: palette_image(W, H).save(p, "BMP"),
    "bmp_bilevel": lambda p: Image.fromarray(noise(W, H)).convert("1").save(p, "BMP"),
    "bmp_rgba": lambda p: rgba(W, H).save(p, "BMP"),
    # PNM
    "ppm_rgb": lambda p: Image.fromarray(noise(W, H)).save(p, "PPM"),
    "pgm_gray": lambda p: Image.fromarray(noise(W, H)).convert("L").save(p, "PPM"),
    "pbm_bilevel": lambda p: Image.fromarray(noise(W, H)).convert("1").save(p, "PPM"),
}

SUFFIX = {"webp": ".webp", "tiff": ".tif", "gif": ".gif", "bmp": ".bmp", "ppm": ".ppm", "pgm": ".pgm",
          "pbm": ".pbm"}


def case_path(tmp_path, name):
    p = tmp_path / (name + SUFFIX[name.split("_")[0]])
    CASES[name](p)
    return p


@pytest.mark.parametrize("name", sorted(CASES))
def test_decode_equals_pil_convert_rgb(feedline_bin, tmp_path, name):
    p = case_path(tmp_path, name)
    expected = pil_rgb(p)
    got = feedline_rgb(feedline_bin, tmp_path, p)
    assert got.shape == expected.shape
    diff = np.argwhere((got != expected).any(-1))
    assert len(diff) == 0, f"{name}: {len(diff)} pixels differ, first at (y, x) {tuple(diff[0])}: " \
                           f"{got[tuple(diff[0])]} vs PIL {expected[tuple(diff[0])]}"


# ---- crafted files: layouts PIL reads but does not write ----

def gif_patched(tmp_path, name, screen, offset, transparency):
    """A GIF whose logical screen and first-frame offset are rewritten."""
    buf = io.BytesIO()
    kw = {"transparency": transparency} if transparency is not None else {}
    palette_image(20, 10).save(buf, "GIF", interlace=False, **kw)
    b = bytearray(buf.getvalue())
    b[6:10] = struct.pack("<HH", *screen)
    d = b.index(b"\x2c", 13 + 3 * 2 ** ((b[10] & 7) + 1))  # image descriptor after the global table
    b[d + 1:d + 5] = struct.pack("<HH", *offset)
    p = tmp_path / name
    p.write_bytes(bytes(b))
    return p


@pytest.mark.parametrize("screen,offset,transparency", [
    ((30, 16), (5, 3), None),   # frame inside a larger screen: the rest is index 0
    ((30, 16), (5, 3), 2),      # ... or the transparent index's colour
    ((12, 6), (4, 2), None),    # frame past the screen: PIL enlarges the canvas
])
def test_gif_first_frame_on_its_canvas(feedline_bin, tmp_path, screen, offset, transparency):
    p = gif_patched(tmp_path, "offset.gif", screen, offset, transparency)
    expected = pil_rgb(p)
    assert info(feedline_bin, p)[1:] == (expected.shape[1], expected.shape[0])
    np.testing.assert_array_equal(feedline_rgb(feedline_bin, tmp_path, p), expected)


def bmp_file(width, height, bits, rows, compression=0, palette=b"", masks=b"", header=40):
    """A BMP with the given header size; `rows` already padded, stored order."""
    info = struct.pack("<iiHHIIiiII", width, height, 1, bits, compression, len(rows), 2835, 2835,
                       len(palette) // 4, 0)
    if header > 40:
        info += masks.ljust(header - 40, b"\0")
        masks = b""
    info = struct.pack("<I", header) + info
    offset = 14 + len(info) + len(masks) + len(palette)
    return b"BM" + struct.pack("<IHHI", offset + len(rows), 0, 0, offset) + info + masks + palette + rows


def pack_rows(values, width, bits):
    """Rows of `bits`-bit little-endian pixels (16/32) or packed indices (4), padded to 4 bytes."""
    out = b""
    for row in values:
        if bits == 4:
            r = bytes((row[i] << 4) | (row[i + 1] if i + 1 < width else 0) for i in range(0, width, 2))
        else:
            r = b"".join(int(v).to_bytes(bits // 8, "little") for v in row)
        out += r.ljust((len(r) + 3) // 4 * 4, b"\0")
    return out


def test_crafted_bmps_equal_pil(feedline_bin, tmp_path):
    rng = np.random.default_rng(5)
    w, h = 13, 7
    v16 = rng.integers(0, 1 << 16, (h, w))
    v32 = rng.integers(0, 1 << 32, (h, w), dtype=np.uint64)
    idx = rng.integers(0, 16, (h, w))
    pal16 = bytes(rng.integers(0, 256, 16 * 4, dtype=np.uint8))
    files = {
        "rgb555.bmp": bmp_file(w, h, 16, pack_rows(v16 & 0x7FFF, w, 16)),
        "rgb565.bmp": bmp_file(w, h, 16, pack_rows(v16, w, 16), compression=3,
                               masks=struct.pack("<III", 0xF800, 0x07E0, 0x001F)),
        "topdown.bmp": bmp_file(w, -h, 16, pack_rows(v16 & 0x7FFF, w, 16)),
        "bgrx.bmp": bmp_file(w, h, 32, pack_rows(v32, w, 32)),
        "v5_rgba.bmp": bmp_file(w, h, 32, pack_rows(v32, w, 32), compression=3, header=124,
                                masks=struct.pack("<IIII", 0xFF0000, 0xFF00, 0xFF, 0xFF000000)),
        "pal4.bmp": bmp_file(w, h, 4, pack_rows(idx, w, 4), palette=pal16),
    }
    for name, data in files.items():
        p = tmp_path / name
        p.write_bytes(data)
        np.testing.assert_array_equal(feedline_rgb(feedline_bin, tmp_path, p), pil_rgb(p), err_msg=name)


def test_plain_and_odd_maxval_pnm_equal_pil(feedline_bin, tmp_path):
    rng = np.random.default_rng(7)
    w, h = 9, 5
    files = {}
    v = rng.integers(0, 2, (h, w))
    files["p1.pbm"] = f"P1\n# comment\n{w} {h}\n".encode() + "\n".join(
        "".join(str(x) for x in row) for row in v).encode() + b"\n"
    v = rng.integers(0, 256, (h, w))
    files["p2.pgm"] = f"P2 {w} {h}\n255\n".encode() + " ".join(map(str, v.flat)).encode() + b"\n"
    v = rng.integers(0, 1001, (h, w, 3))
    files["p3_1000.ppm"] = f"P3\n{w} {h} 1000\n".encode() + "\n".join(map(str, v.flat)).encode() + b"\n"
    v = rng.integers(0, 7, (h, w, 3))
    files["p6_maxval6.ppm"] = f"P6\n{w} {h}\n6\n".encode() + bytes(v.astype(np.uint8).flat)
    v = rng.integers(0, 65536, (h, w, 3))
    files["p6_16bit.ppm"] = f"P6\n{w} {h}\n65535\n".encode() + v.astype(">u2").tobytes()
    for name, data in files.items():
        p = tmp_path / name
        p.write_bytes(data)
        np.testing.assert_array_equal(feedline_rgb(feedline_bin, tmp_path, p), pil_rgb(p), err_msg=name)


def test_16bit_gray_scales_where_pil_clips(feedline_bin, tmp_path):
    """PIL opens 16-bit gray PGM/TIFF as mode I;16/I and convert("RGB")
    clips at 255; we scale to 8 bits, as for 16-bit PNG and RGB."""
    v = np.random.default_rng(9).integers(0, 65536, (H, W)).astype(np.uint16)
    pgm = tmp_path / "g16.pgm"
    pgm.write_bytes(f"P5\n{W} {H}\n65535\n".encode() + v.astype(">u2").tobytes())
    tif = tmp_path / "g16.tif"
    Image.fromarray(v, "I;16").save(tif)
    for p in (pgm, tif):
        with Image.open(p) as im:
            samples = np.asarray(im).astype(np.float64)
        np.testing.assert_array_equal(samples, v)
        # PNM: PIL's own formula for 16-bit RGB; TIFF: libtiff keeps the high byte.
        expected = np.rint(samples / 65535 * 255).astype(np.uint8) if p == pgm else \
            (v >> 8).astype(np.uint8)
        got = feedline_rgb(feedline_bin, tmp_path, p)
        np.testing.assert_array_equal(got, np.repeat(expected[..., None], 3, -1), err_msg=p.name)


# ---- errors ----

@pytest.mark.parametrize("name", ["webp_lossy_rgb", "webp_lossless_rgb", "tiff_rgb_raw", "tiff_rgb_lzw",
                                  "gif_palette", "bmp_rgb", "ppm_rgb", "pgm_gray", "pbm_bilevel"])
def test_truncated_file_is_a_clear_error(feedline_bin, tmp_path, name):
    p = case_path(tmp_path, name)
    data = p.read_bytes()
    fmt = {"webp": "WebP", "tiff": "TIFF", "gif": "GIF", "bmp": "BMP", "ppm": "PNM", "pgm": "PNM",
           "pbm": "PNM"}[name.split("_")[0]]
    for cut in (len(data) // 2, len(data) - 7):
        q = tmp_path / ("cut" + p.suffix)
        q.write_bytes(data[:cut])
        out = tmp_path / "out.raw"
        proc = run([feedline_bin, "image", "transform", str(q), str(out), "--recipe", "full", "--size", "16"],
                   check=False)
        assert proc.returncode != 0, f"{name} cut at {cut} of {len(data)} decoded"
        assert f"corrupt {fmt}" in proc.stderr, proc.stderr


def test_animated_webp_is_unimplemented(feedline_bin, tmp_path):
    p = tmp_path / "anim.webp"
    palette_image(W, H).convert("RGB").save(p, "WEBP", save_all=True, duration=50,
                                            append_images=[Image.fromarray(noise(W, H, 3))])
    proc = run([feedline_bin, "image", "info", str(p)], check=False)
    assert proc.returncode != 0
    assert "animated WebP is not supported" in proc.stderr, proc.stderr


def test_rle_bmp_is_unimplemented(feedline_bin, tmp_path):
    p = tmp_path / "rle.bmp"
    p.write_bytes(bmp_file(4, 2, 8, b"\x04\x01\x00\x00\x04\x02\x00\x01", compression=1,
                           palette=bytes(range(12)) + b"\0" * 1012))
    proc = run([feedline_bin, "image", "info", str(p)], check=False)
    assert proc.returncode != 0
    assert "RLE8" in proc.stderr and "not supported" in proc.stderr, proc.stderr


def test_palette_indices_past_the_table_match_pil(feedline_bin, tmp_path):
    """Indices the colour table does not cover: feedline shows gray (i, i, i),
    as Debian 12's Pillow 9.4 does; Pillow 11 (make test-torch2's) shows
    black there, and matches elsewhere."""
    a = np.array([[0, 1, 2, 3] * 2] * 4, np.uint8)
    im = Image.fromarray(a, "P")
    im.putpalette([10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120])
    buf = io.BytesIO()
    im.save(buf, "GIF", interlace=False, optimize=False)
    b = bytearray(buf.getvalue())
    table = 3 * 2 ** ((b[10] & 7) + 1)
    gif = b[:13] + b[13:19] + b[13 + table:]  # keep 2 of the 4 entries
    gif[10] &= ~7
    bmp = bmp_file(8, 4, 8, bytes(a[::-1].flat), palette=bytes([30, 20, 10, 0, 60, 50, 40, 0]))
    table_rgb = np.array([[10, 20, 30], [40, 50, 60]], np.uint8)
    gray = np.stack([a] * 3, -1)
    outside = a >= 2
    expected = np.where(outside[..., None], gray, table_rgb[np.minimum(a, 1)])
    pil_major = int(Image.__version__.split(".")[0])
    pil_expected = np.where(outside[..., None], 0, expected) if pil_major >= 11 else expected
    for name, data in (("oob.gif", bytes(gif)), ("oob.bmp", bmp)):
        p = tmp_path / name
        p.write_bytes(data)
        np.testing.assert_array_equal(feedline_rgb(feedline_bin, tmp_path, p), expected, err_msg=name)
        np.testing.assert_array_equal(pil_rgb(p), pil_expected, err_msg=f"{name}, Pillow {Image.__version__}")
