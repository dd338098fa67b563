#!/usr/bin/env python3
"""Writes the PNG seeds of tests/fuzz/corpus/png: small images covering the
decoder's paths (Adam7 interlacing, palettes with tRNS, 1/2/4/16-bit
samples, grey, grey+alpha, RGBA, every row filter). Standard library only;
run it from anywhere: python3 tests/fuzz/make_png_seeds.py. The corpus also
holds copies of the three PNGs of corpus/image, written by a real encoder."""
import pathlib
import struct
import zlib

OUT = pathlib.Path(__file__).resolve().parent / "corpus" / "png"
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # colour type -> samples per pixel
ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def pack_row(samples, depth):
    if depth == 8:
        return bytes(samples)
    if depth == 16:
        return b"".join(struct.pack(">H", s) for s in samples)
    out, acc, bits = bytearray(), 0, 0
    for s in samples:
        acc, bits = (acc << depth) | s, bits + depth
        if bits == 8:
            out.append(acc)
            acc, bits = 0, 0
    if bits:
        out.append(acc << (8 - bits))
    return bytes(out)


def filtered(rows, bpp, filters):
    """Rows of bytes, each preceded by its filter type (0-4, cycling)."""
    out, prev = bytearray(), None
    for y, row in enumerate(rows):
        f = filters[y % len(filters)]
        up = prev if prev is not None else bytes(len(row))
        res = bytearray(len(row))
        for i, x in enumerate(row):
            a = row[i - bpp] if i >= bpp else 0
            b, c = up[i], (up[i - bpp] if i >= bpp else 0)
            if f == 0:
                pred = 0
            elif f == 1:
                pred = a
            elif f == 2:
                pred = b
            elif f == 3:
                pred = (a + b) // 2
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
            res[i] = (x - pred) & 0xFF
        out += bytes([f]) + res
        prev = row
    return bytes(out)


def png(width, height, depth, colour, pixel, interlace=False, palette=None, trns=None, filters=(0, 1, 2, 3, 4),
        idat_chunk=None):
    """pixel(x, y) -> tuple of samples; the zlib stream cut into IDATs of
    idat_chunk bytes (None: one IDAT)."""
    ch = CHANNELS[colour]
    bpp = max(1, ch * depth // 8)
    passes = ADAM7 if interlace else [(0, 0, 1, 1)]
    raw = b""
    for x0, y0, dx, dy in passes:
        xs, ys = range(x0, width, dx), range(y0, height, dy)
        if not xs or not ys:
            continue
        rows = [pack_row([s for x in xs for s in pixel(x, y)], depth) for y in ys]
        raw += filtered(rows, bpp, filters)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0,
                                                              1 if interlace else 0))
    if palette:
        out += chunk(b"PLTE", b"".join(bytes(c) for c in palette))
    if trns is not None:
        out += chunk(b"tRNS", trns)
    out += chunk(b"tEXt", b"Comment\x00feedline fuzz seed")
    z = zlib.compress(raw, 9)
    step = idat_chunk or max(1, len(z))
    return out + b"".join(chunk(b"IDAT", z[i:i + step]) for i in range(0, len(z), step)) + chunk(b"IEND", b"")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    pal = [((i * 37) % 256, (i * 91) % 256, (i * 151) % 256) for i in range(16)]
    seeds = {
        "rgb8_interlaced.png": png(13, 11, 8, 2, lambda x, y: (x * 19 % 256, y * 23 % 256, (x ^ y) * 7 % 256),
                                   interlace=True),
        "palette4_trns_interlaced.png": png(9, 7, 4, 3, lambda x, y: ((x + 2 * y) % 16,), interlace=True,
                                            palette=pal, trns=bytes(range(0, 256, 32))),
        "palette8_trns.png": png(10, 6, 8, 3, lambda x, y: ((x * y) % 16,), palette=pal, trns=b"\x00\x80"),
        "gray1.png": png(17, 5, 1, 0, lambda x, y: ((x + y) % 2,)),
        "gray2_interlaced.png": png(7, 9, 2, 0, lambda x, y: ((x * y) % 4,), interlace=True),
        "gray16_trns.png": png(6, 6, 16, 0, lambda x, y: (x * 9000 + y * 700,), trns=struct.pack(">H", 700)),
        "gray_alpha16_interlaced.png": png(5, 8, 16, 4, lambda x, y: (x * 12000, 65535 - y * 8000),
                                           interlace=True),
        "rgba16.png": png(4, 5, 16, 6, lambda x, y: (x * 16000, y * 13000, 5000, 40000 + x * y * 1000)),
        "rgba8_interlaced.png": png(12, 12, 8, 6, lambda x, y: (x * 20, y * 20, 128, (x * y) % 256),
                                    interlace=True),
        "rgb16_trns.png": png(3, 3, 16, 2, lambda x, y: (x * 30000, y * 30000, 100),
                              trns=struct.pack(">HHH", 0, 0, 100)),
        # The fast path's types (8-bit, not interlaced), the data over several IDATs.
        "rgb8_idats.png": png(11, 9, 8, 2, lambda x, y: (x * 23 % 256, y * 29 % 256, (x * y) % 256), idat_chunk=40),
        "gray8_idats.png": png(7, 13, 8, 0, lambda x, y: ((x * 31 + y * 17) % 256,), idat_chunk=25),
        "gray_alpha8.png": png(6, 5, 8, 4, lambda x, y: (x * 40, 255 - y * 30)),
        "rgba8.png": png(5, 7, 8, 6, lambda x, y: (x * 50, y * 30, (x + y) * 9, 200), idat_chunk=30),
    }
    for name, data in seeds.items():
        (OUT / name).write_bytes(data)
    print(f"wrote {len(seeds)} seeds to {OUT}")


if __name__ == "__main__":
    main()
