"""python/feedline/_C.pyi, the stub type checkers read for the extension
(the package ships py.typed), names what the binding defines: every
function, class, property and method, no more and no fewer."""
import ast
import inspect
import pathlib

from feedline import _C

STUB = pathlib.Path(__file__).resolve().parents[2] / "python" / "feedline" / "_C.pyi"


def _class_members(node, prefix, members):
    """Records the names a stub class declares (methods, properties,
    attributes, nested classes) under its dotted name, nested ones too."""
    names = set()
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.ClassDef)):
            names.add(item.name)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            names.add(item.target.id)
        if isinstance(item, ast.ClassDef):
            _class_members(item, f"{prefix}{item.name}.", members)
    members[prefix.rstrip(".")] = names - {"__init__"}


def _stub_names():
    tree = ast.parse(STUB.read_text())
    top, members = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            top.add(node.name)
        if isinstance(node, ast.ClassDef):
            _class_members(node, f"{node.name}.", members)
    return top, members


def _public(obj):
    return {n for n in dir(obj) if not n.startswith("_")}


def test_stub_names_every_public_name_of_the_extension():
    top, _ = _stub_names()
    assert top == _public(_C)


def test_stub_names_every_member_of_each_class():
    _, members = _stub_names()
    for name, declared in members.items():
        cls = _C
        for part in name.split("."):
            cls = getattr(cls, part)
        if issubclass(cls, BaseException):
            assert not declared, name  # the errors add nothing to their bases
            continue
        # A pybind11 enum: the stub declares its values.
        actual = set(cls.__members__) if hasattr(cls, "__members__") else _public(cls)
        assert declared == actual, name


def test_stub_signatures_name_the_bindings_keyword_arguments():
    tree = ast.parse(STUB.read_text())
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    for name, node in funcs.items():
        doc = inspect.getdoc(getattr(_C, name)) or ""
        for arg in node.args.args:
            assert f"{arg.arg}:" in doc.splitlines()[0], (name, arg.arg, doc.splitlines()[0])
