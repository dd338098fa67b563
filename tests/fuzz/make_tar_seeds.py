#!/usr/bin/env python3
"""Writes the tar seeds of tests/fuzz/corpus/tar_dataset: small WebDataset
archives in each header dialect the indexer reads (ustar with a prefix,
GNU long names, PAX path records, base-256 sizes), with .cls labels,
directories and links that are not samples. Standard library only; each
archive is cut right after its end-of-archive marker to keep seeds small.
Run it from anywhere: python3 tests/fuzz/make_tar_seeds.py"""
import io
import pathlib
import tarfile

OUT = pathlib.Path(__file__).resolve().parent / "corpus" / "tar_dataset"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))


def archive(members, fmt):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for name, data, kind in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.mtime = 0
            if kind == tarfile.REGTYPE:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                if kind == tarfile.SYMTYPE:
                    info.linkname = "x"
                tar.addfile(info)
        end = tar.offset
    return buf.getvalue()[:end + 1024]


def samples(keys, ext="png"):
    out = []
    for i, key in enumerate(keys):
        out.append((f"{key}.{ext}", PNG[: 20 + i], tarfile.REGTYPE))
        out.append((f"{key}.cls", f"{i}\n".encode(), tarfile.REGTYPE))
    return out


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    long_dir = "n01440764/" + "d" * 120
    seeds = {
        "ustar.tar": archive([("train", b"", tarfile.DIRTYPE)] + samples(["train/a0", "train/a1"]),
                             tarfile.USTAR_FORMAT),
        "ustar_prefix.tar": archive(samples([long_dir[:90] + "/s0"], "jpg"), tarfile.USTAR_FORMAT),
        "gnu_longname.tar": archive(samples([long_dir + "/s0", long_dir + "/s1"], "jpeg")
                                    + [("lnk", b"", tarfile.SYMTYPE)], tarfile.GNU_FORMAT),
        "pax_path.tar": archive(samples([long_dir + "/p0", "short/p1"]), tarfile.PAX_FORMAT),
        "no_label.tar": archive([("k/x.png", PNG, tarfile.REGTYPE), ("k/x.txt", b"caption", tarfile.REGTYPE)],
                                tarfile.USTAR_FORMAT),
    }
    # A GNU base-256 size field (the indexer's other number format).
    b256 = bytearray(seeds["ustar.tar"])
    off = next(i for i in range(0, len(b256), 512) if b256[i:i + 12] == b"train/a0.png")
    size = len(PNG[:20])
    b256[off + 124:off + 136] = bytes([0x80] + [0] * 10 + [size])
    b256[off + 148:off + 156] = b" " * 8
    b256[off + 148:off + 155] = b"%06o\x00" % sum(b256[off:off + 512])
    seeds["base256_size.tar"] = bytes(b256)
    for name, data in seeds.items():
        (OUT / name).write_bytes(data)
    print(f"wrote {len(seeds)} seeds to {OUT}")


if __name__ == "__main__":
    main()
