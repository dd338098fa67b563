"""The dependency rules of ../shared/DESIGN.md ("Who may know whom"), checked
over the tree's #include lines, so that a change that breaks a layer fails
here instead of in a reviewer's head:

- core knows nothing above it; engine knows no codec, format or framework;
- io carries bytes and knows no codec; image knows no source; tokens (token
  files and windows) knows core and engine only;
- only the recipes layer (pipelines) knows both sources and ops;
- nothing under src/ or include/ includes Python, pybind11 or torch;
- tools/ and examples/ use the public API only (no private src/ headers).

Public headers are one flat directory; LAYER_OF_HEADER says which layer each
belongs to, and a new header must be added to it (the test says so).
"""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]

LAYER_OF_HEADER = {
    "export.h": "core", "status.h": "core", "buffer.h": "core", "random.h": "core",
    "sample.h": "engine", "sampler.h": "engine", "batch.h": "engine", "loader.h": "engine",
    "metrics.h": "engine",
    "image.h": "image",
    "file.h": "io", "shard.h": "io", "shard_format.h": "io", "dataset.h": "io", "image_folder.h": "io",
    "webdataset.h": "io", "source.h": "io", "list_dataset.h": "io",
    "tokens.h": "tokens", "token_loader.h": "tokens",
    "pipeline_builder.h": "pipelines", "op_registry.h": "pipelines",
}

# Which layers each layer may include (itself included).
ALLOWED = {
    "core": {"core"},
    "engine": {"core", "engine"},
    "image": {"core", "engine", "image"},
    "io": {"core", "engine", "io"},
    "tokens": {"core", "engine", "tokens"},
    "pipelines": {"core", "engine", "image", "io", "tokens", "pipelines"},
}

CODEC_HEADERS = re.compile(r"^(jpeglib|turbojpeg|spng|png|libdeflate|webp/.*|tiffio|tiff|gif_lib|zlib)\.h$")
FORMAT_HEADERS = re.compile(r"^(nlohmann/.*|curl/.*)$")
FRAMEWORK_HEADERS = re.compile(r"^(Python\.h|pybind11/.*|torch/.*|ATen/.*|c10/.*)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def includes(path):
    return [(m.group(1), m.group(2)) for m in INCLUDE.finditer(path.read_text(errors="replace"))]


def layer_of(path):
    rel = path.relative_to(ROOT)
    if rel.parts[0] == "include":
        return LAYER_OF_HEADER.get(rel.name)
    if rel.parts[0] == "src":
        return rel.parts[1]
    return None


def layer_of_include(name):
    if name.startswith("feedline/"):
        return LAYER_OF_HEADER.get(name[len("feedline/"):], "unknown public header " + name)
    if name.startswith("src/"):
        return name.split("/")[1]
    return None


def sources(*dirs):
    for d in dirs:
        for p in sorted((ROOT / d).rglob("*")):
            if p.suffix in (".h", ".cc") and p.is_file():
                yield p


def test_every_public_header_has_a_layer():
    headers = {p.name for p in (ROOT / "include" / "feedline").glob("*.h")}
    assert headers - LAYER_OF_HEADER.keys() == set(), "add the new public headers to LAYER_OF_HEADER"
    assert LAYER_OF_HEADER.keys() - headers == set(), "LAYER_OF_HEADER names headers that no longer exist"


def layer_violations(path):
    layer = layer_of(path)
    rel = path.relative_to(ROOT)
    if layer not in ALLOWED:
        return [f"{rel}: in no layer (add src/{layer}/ to ALLOWED)"]
    out = []
    for kind, name in includes(path):
        if kind == '"':
            target = layer_of_include(name)
            if target is not None and target not in ALLOWED[layer]:
                out.append(f"{rel} ({layer}) includes {name} ({target}); {layer} may know {sorted(ALLOWED[layer])}")
        elif FRAMEWORK_HEADERS.match(name):
            out.append(f"{rel} includes <{name}>: no framework under src/ or include/")
        elif layer in ("core", "engine", "io") and CODEC_HEADERS.match(name):
            out.append(f"{rel} ({layer}) includes the codec header <{name}>")
        elif layer in ("core", "engine") and FORMAT_HEADERS.match(name):
            out.append(f"{rel} ({layer}) includes <{name}>")
    return out


def test_a_layer_includes_only_the_layers_below_it():
    violations = [v for p in sources("src", "include") for v in layer_violations(p)]
    assert violations == []


def test_the_checker_sees_a_violation():
    # io including a codec's public header is what the recipes layer ended.
    fake = ROOT / "src" / "io" / "dataset.cc"
    assert layer_of(fake) == "io" and layer_of_include("feedline/image.h") == "image"
    assert "image" not in ALLOWED["io"]


def test_tools_and_examples_use_the_public_api_only():
    private = [f"{p.relative_to(ROOT)}: {name}" for p in sources("tools", "examples")
               for kind, name in includes(p) if kind == '"' and name.startswith("src/")]
    assert private == []
