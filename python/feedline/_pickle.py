"""Pickling of the native transform objects (_C.ImageTransform and the ops
inside it), so that a recipe can travel to another process: Ray actors and
tasks (feedline.integrations.ray), multiprocessing. A pybind11 struct is
rebuilt from its read-write attributes, which are all of its state that
Python can set; its enums and nested ops pickle the same way."""
import copyreg
from typing import Any, Callable, Dict, Tuple

from . import _C

_TYPES = ("ImageTransform", "PixelOp", "EraseOp", "BatchMixOp")


def _fields(cls: type) -> Tuple[str, ...]:
    names = []
    for klass in cls.__mro__:
        for k, v in vars(klass).items():
            if isinstance(v, property) and v.fset is not None and not k.startswith("_") and k not in names:
                names.append(k)
    return tuple(names)


def _rebuild(cls: type, state: Dict[str, Any]) -> Any:
    obj = cls()
    for k, v in state.items():
        setattr(obj, k, v)
    return obj


def _reducer(cls: type) -> Callable[[Any], Tuple[Any, ...]]:
    names = _fields(cls)

    def reduce(obj: Any) -> Tuple[Any, ...]:
        return _rebuild, (cls, {k: getattr(obj, k) for k in names})
    return reduce


for _name in _TYPES:
    _cls = getattr(_C, _name, None)
    if _cls is not None:
        copyreg.pickle(_cls, _reducer(_cls))
