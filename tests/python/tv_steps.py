"""Shared by the pixel-op and policy tests: torchvision's v2 where this
torchvision has it (Debian's 0.14 does not), and a drawn policy step read
back as the torchvision op and signed magnitude it stands for."""
import math

import pytest
import torch

from feedline import _C

try:
    import torchvision.transforms.v2 as V2
    import torchvision.transforms.v2.functional as F2
except ImportError:  # torchvision < 0.15 (Debian's 0.14) has no v2
    V2 = F2 = None
needs_v2 = pytest.mark.skipif(V2 is None, reason="torchvision.transforms.v2 needs torchvision >= 0.15")

COLOUR = {"BRIGHTNESS": "Brightness", "SATURATION": "Color", "CONTRAST": "Contrast", "SHARPNESS": "Sharpness"}


def step_name(s):
    """The torchvision op name of a drawn policy step."""
    k = s.kind.name
    if k != "AFFINE":
        return COLOUR.get(k) or {"AUTOCONTRAST": "AutoContrast"}.get(k, k.capitalize())
    if s.rotate:
        return "Rotate"
    if s.corner_center:
        return "ShearY" if s.shear_y != 0 else "ShearX"
    return "TranslateY" if s.translate_y != 0 else "TranslateX"


def step_magnitude(s, image_size):
    """The signed torchvision magnitude a drawn step stands for (Solarize:
    feedline's threshold; a translation in bins: torch's own table for the
    size, RandAugment's 150/331 of it or AugMix's third)."""
    k = s.kind.name
    if k in COLOUR:
        return s.value - 1.0
    if k in ("POSTERIZE", "SOLARIZE"):
        return s.value
    if k in ("AUTOCONTRAST", "EQUALIZE"):
        return 0.0
    if s.rotate:
        return s.angle
    if s.corner_center:
        return math.tan(math.radians(s.shear_x or s.shear_y))
    t = s.translate_x or s.translate_y
    ends = {_C.AffineTranslate.RAND_AUGMENT: 150.0 / 331.0, _C.AffineTranslate.AUG_MIX: 1 / 3.0}
    if s.translate_unit not in ends:
        return t
    assert s.translate_unit != _C.AffineTranslate.AUG_MIX or s.magnitude_bins == 10  # AugMix's _PARAMETER_MAX
    h, w = image_size
    size = w if s.translate_x else h
    m = float(torch.linspace(0.0, ends[s.translate_unit] * size, s.magnitude_bins)[int(abs(t))])
    return -m if t < 0 else m
