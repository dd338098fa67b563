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
    "metrics.h": "engine", "raw_ops.h": "engine",
    "image.h": "image",
    "file.h": "io", "shard.h": "io", "shard_format.h": "io", "dataset.h": "io", "image_folder.h": "io",
    "webdataset.h": "io", "source.h": "io", "list_dataset.h": "io", "object_store.h": "io", "columnar.h": "io",
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


# -- the build graph (issue 40): a target links only the layers its code knows ----------------------
LIBRARY_LAYER = {"feedline_core": "core", "feedline_engine": "engine", "feedline_image": "image",
                 "feedline_io": "io", "feedline_tokens": "tokens", "feedline_pipelines": "pipelines"}
CMAKE_CALL = re.compile(r"\b(feedline_cc_library|feedline_cc_test|target_link_libraries)\s*\(([^)]*)\)", re.S)


def cmake_targets(*files):
    """{target: {"srcs": [...], "deps": [...], "kind": "library"|"test"}} from
    the feedline_cc_library / feedline_cc_test calls and target_link_libraries
    of `files` (targets named through a loop variable are left out)."""
    targets = {}
    for rel in files:
        text = re.sub(r"#[^\n]*", "", (ROOT / rel).read_text())
        base = (ROOT / rel).parent
        for fn, args in CMAKE_CALL.findall(text):
            words = args.split()
            if fn == "target_link_libraries":
                name, libs = words[0], [w for w in words[1:] if w not in ("PRIVATE", "PUBLIC", "INTERFACE")]
                if name in targets:
                    targets[name]["deps"] += libs
                continue
            parsed, key = {"NAME": [], "SRCS": [], "DEPS": []}, None
            for w in words:
                if w in parsed or w in ("TIMEOUT", "LABELS"):
                    key = w
                elif key in parsed:
                    parsed[key].append(w)
            name = parsed["NAME"][0]
            if "${" in name:
                continue
            targets[name] = {"srcs": [(base / s).relative_to(ROOT) for s in parsed["SRCS"] if "${" not in s],
                             "deps": parsed["DEPS"], "kind": "library" if fn == "feedline_cc_library" else "test"}
    return targets


def linked_layers(name, targets, seen=None):
    """The layers of every feedline library `name` links, through the
    libraries it links (CMake's DEPS are PUBLIC: they carry on)."""
    seen = set() if seen is None else seen
    out = set()
    for d in targets.get(name, {}).get("deps", []):
        if d in seen:
            continue
        seen.add(d)
        if d in LIBRARY_LAYER:
            out.add(LIBRARY_LAYER[d])
        if d in targets:
            out |= linked_layers(d, targets, seen)
    return out


def known_layers(path, seen=None):
    """The layers a test's code knows: those of the headers it includes,
    through the test-local headers (tests/...) it includes."""
    seen = set() if seen is None else seen
    out = set()
    for kind, name in includes(ROOT / path):
        if kind != '"':
            continue
        target = layer_of_include(name)
        if target is not None:
            out.add(target)
        elif name.startswith("tests/") and name not in seen and (ROOT / name).is_file():
            seen.add(name)
            out |= known_layers(pathlib.Path(name), seen)
    return out


def reachable(layers):
    out = set()
    for layer in layers:
        out |= ALLOWED.get(layer, {layer})
    return out


def test_each_library_links_only_the_layers_below_it():
    targets = cmake_targets("src/CMakeLists.txt")
    bad = [f"{name} ({LIBRARY_LAYER[name]}) links {d} ({LIBRARY_LAYER[d]})"
           for name in LIBRARY_LAYER for d in targets[name]["deps"]
           if d in LIBRARY_LAYER and LIBRARY_LAYER[d] not in ALLOWED[LIBRARY_LAYER[name]]]
    assert bad == []
    # io carries bytes: no codec in its link line either (Debian's libjpeg, spng, libwebp, ...).
    codecs = [d for d in targets["feedline_io"]["deps"] if re.search(r"JPEG|SPNG|DEFLATE|WEBP|TIFF|GIF|HWY", d)]
    assert codecs == []
    assert "image" not in linked_layers("feedline_io", targets)


def test_each_test_knows_and_links_only_the_layers_its_folder_may_know():
    # A test of tests/<layer>/ is held to <layer>'s rule, in what it includes
    # (through the test headers it includes) and in what it links: an io
    # test linked to the recipes layer builds only with images (tar_dataset_test
    # and read_ahead_test did, for a raw-bytes pipeline; tuner_test, an
    # engine test, knew io for one read-ahead case, issue 40).
    targets = {**cmake_targets("src/CMakeLists.txt"), **cmake_targets("tests/CMakeLists.txt")}
    bad = []
    checked = 0
    for name, t in targets.items():
        dirs = {s.parts[1] for s in t["srcs"] if s.parts[0] == "tests"}
        if t["kind"] == "library" and not dirs:
            continue
        for d in dirs & ALLOWED.keys():
            checked += 1
            knows = set().union(*(known_layers(s) for s in t["srcs"]))
            links = linked_layers(name, targets)
            for what, layers in (("includes", knows), ("links", links)):
                if layers - ALLOWED[d]:
                    bad.append(f"{name} (tests/{d}) {what} {sorted(layers - ALLOWED[d])}; {d} may know "
                               f"{sorted(ALLOWED[d])}")
    assert bad == []
    assert checked >= 30  # the parser saw the suites (the image tests, named through a loop, are not among them)


def test_the_build_graph_checker_sees_a_violation():
    # The tree as it was: an io test linking the recipes layer.
    targets = {**cmake_targets("src/CMakeLists.txt"), **cmake_targets("tests/CMakeLists.txt")}
    t = dict(targets["tar_dataset_test"], deps=["feedline_pipelines", "feedline_io"])
    targets["tar_dataset_test"] = t
    assert {"image", "pipelines"} <= linked_layers("tar_dataset_test", targets) - ALLOWED["io"]
    assert known_layers(pathlib.Path("tests/engine/tuner_test.cc")) <= ALLOWED["engine"]
    assert known_layers(pathlib.Path("tests/io/read_ahead_test.cc")) <= ALLOWED["io"]
