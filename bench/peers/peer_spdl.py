"""SPDL: a PipelineBuilder pipeline (source of indices -> decode stage with
concurrency = cores -> aggregate(batch) -> collate -> sink of 3), built with
num_threads = cores, as SPDL's getting-started and ImageNet example do it.
Each image is demuxed and decoded by FFmpeg (Debian's libavcodec) with the
crop, the scale to 224 (bilinear) and the flip done in FFmpeg's filter
graph, then normalised with numpy in the same stage; RandomResizedCrop's
window is drawn as torchvision draws it (SPDL has no such op). One
continuous pipeline across epochs (no restart)."""
import itertools
import os
import sys

import numpy as np
import spdl.io
from spdl.pipeline import PipelineBuilder

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MEAN = np.array(common.MEAN, np.float32).reshape(1, 1, 3)
INV_STD = (1 / np.array(common.STD, np.float32)).reshape(1, 1, 3)


def make(a, files, labels):
    rng = np.random.default_rng(a.seed)

    def indices():
        for _epoch in itertools.count():
            order = rng.permutation(len(files)) if a.recipe == "train" else range(len(files))
            for i in order:
                yield int(i), int(rng.integers(1 << 62))

    def load(item):
        i, seed = item
        packets = spdl.io.demux_image(files[i])
        w, h = packets.width, packets.height
        if a.recipe == "train":
            r = np.random.default_rng(seed)
            left, top, cw, ch = common.rrc_params(r, w, h)
            fd = f"crop={cw}:{ch}:{left}:{top},scale=224:224:flags=bilinear"
            if r.uniform() < 0.5:
                fd += ",hflip"
        else:
            sw, sh = common.eval_size(w, h)
            fd = (f"scale={sw}:{sh}:flags=bilinear,"
                  f"crop=224:224:{int(round((sw - 224) / 2.0))}:{int(round((sh - 224) / 2.0))}")
        frames = spdl.io.decode_packets(packets, filter_desc=fd + ",format=pix_fmts=rgb24")
        x = spdl.io.to_numpy(spdl.io.convert_frames(frames)).reshape(224, 224, 3)
        x = (x.astype(np.float32) * np.float32(1 / 255) - MEAN) * INV_STD
        return np.ascontiguousarray(x.transpose(2, 0, 1)), labels[i]

    def collate(items):
        return np.stack([x for x, _ in items]), np.array([y for _, y in items])

    pipeline = (PipelineBuilder().add_source(indices()).pipe(load, concurrency=a.cores)
                .aggregate(a.batch, drop_last=True).pipe(collate).add_sink(3).build(num_threads=a.cores))

    class Forever:
        def __iter__(self):
            pipeline.start()
            while True:
                yield pipeline.get_item()
    return Forever()


def to_numpy(batch):
    return batch[0], "NCHW"


if __name__ == "__main__":
    from importlib.metadata import version
    common.run("spdl", make, to_numpy, f"spdl {version('spdl')} (FFmpeg from Debian)")
