"""torch DataLoader + torchvision transforms v2, in two modes:

  pil     (default) ImageFolder's PIL loader and v2 transforms on PIL images:
          today's tutorial default;
  decode  torchvision.io.decode_jpeg (decode_png for the PNGs) to uint8
          tensors and v2 transforms on them (torchvision's "performance
          considerations": tensors, not PIL; uint8 until ToDtype).

Configured as torch's docs recommend for speed on CPU: num_workers = cores,
persistent_workers=True, prefetch_factor 2 (the default), drop_last; no
pin_memory (there is no GPU to pin for). The same module runs in the
pillow-simd environment, where `import PIL` finds pillow-simd.
"""
import os
import sys

import torch
import torchvision
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import v2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MODE = os.environ.get("PEER_TORCH_MODE", "pil")


def transforms(recipe):
    if recipe == "train":
        geometry = [v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip()]
    else:
        geometry = [v2.Resize(256, antialias=True), v2.CenterCrop(224)]
    if MODE == "pil":  # geometry on the PIL image, then to a tensor
        return v2.Compose(geometry + [v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                                      v2.Normalize(common.MEAN, common.STD)])
    return v2.Compose(geometry + [v2.ToDtype(torch.float32, scale=True), v2.Normalize(common.MEAN, common.STD)])


class Files(Dataset):
    def __init__(self, files, labels, tf):
        self.files, self.labels, self.tf = files, labels, tf

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        path = self.files[i]
        if MODE == "pil":
            from PIL import Image
            with open(path, "rb") as f:
                img = Image.open(f).convert("RGB")
        else:
            data = torchvision.io.read_file(path)
            mode = torchvision.io.ImageReadMode.RGB
            if path.lower().endswith(".png"):
                img = torchvision.io.decode_png(data, mode=mode)
            else:
                img = torchvision.io.decode_jpeg(data, mode=mode)
        return self.tf(img), self.labels[i]


def make(a, files, labels):
    torch.manual_seed(a.seed)
    return DataLoader(Files(files, labels, transforms(a.recipe)), batch_size=a.batch,
                      shuffle=a.recipe == "train", num_workers=a.cores, persistent_workers=True,
                      prefetch_factor=2, drop_last=True)


def to_numpy(batch):
    return batch[0].numpy(), "NCHW"


if __name__ == "__main__":
    import PIL
    name = {"pil": "torch-pil", "decode": "torch-decode_jpeg"}[MODE]
    version = f"torch {torch.__version__}, torchvision {torchvision.__version__}"
    if MODE == "pil":
        version += f", {'pillow-simd' if 'post' in PIL.__version__ else 'Pillow'} {PIL.__version__}"
        if "post" in PIL.__version__:
            name = "pillow-simd"
    common.run(name, make, to_numpy, version)
