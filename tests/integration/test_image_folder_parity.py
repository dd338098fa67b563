"""feedline.Loader over an image folder lists what torchvision's ImageFolder
lists: the same class_to_idx and the same samples in the same order, on real
trees with nested folders whose depth-first order differs from
sorted(os.walk()), every extension in any case, symlinks, hidden folders and
names that are not UTF-8 (built through bytes paths). The one documented
difference, a symlink loop, is checked against torchvision's output with the
looping paths taken out. Ours is src/io/image_folder.cc; torchvision is
Debian's (python3-torchvision 0.14 with torch 1.13).
"""
import io
import os

import pytest
import torchvision
from PIL import Image
from torchvision.datasets.folder import IMG_EXTENSIONS, has_file_allowed_extension

import feedline


def _write(root, rel, data=b"\xff"):
    path = os.path.join(os.fsencode(root), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def _link(root, target, rel):
    path = os.path.join(os.fsencode(root), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(target, path)


def _jpeg(seed):
    img = Image.new("RGB", (24, 16), (seed * 40 % 256, 90, 200))
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=90)
    return out.getvalue()


def _ours(root, **kwargs):
    with feedline.Loader(root, batch_size=1, num_threads=1, **kwargs) as loader:
        return loader.class_to_idx, loader.samples


def _theirs(root):
    ds = torchvision.datasets.ImageFolder(root)
    return ds.class_to_idx, ds.samples


@pytest.fixture()
def tree(tmp_path):
    """A tree exercising everything but loops and empty classes."""
    root = tmp_path / "root"
    store = tmp_path / "store"  # outside the root, reached through links
    for rel in [b"deep/s1.jpg", b"s0.png"]:
        _write(store, rel)
    files = [
        # DFS order a, a/x, a-b differs from sorted path order a, a-b, a/x.
        b"a/0.jpg", b"a/a/1.jpg", b"a/a-b/2.jpg", b"a/a/x/3.jpg", b"a/a.b/4.jpg", b"a/A/5.jpg",
        # Every extension, in mixed case; a file named only ".png".
        b"a/e1.JPG", b"a/e2.jpeg", b"a/e3.PNG", b"a/e4.ppm", b"a/e5.BMP", b"a/e6.pgm", b"a/e7.Tif",
        b"a/e8.tiff", b"a/e9.WEBP", b"a/.png", b"a/Z.jpg", b"a/_.jpg",
        # Not images: kept out by both.
        b"a/notes.txt", b"a/x.jpg.bak", b"a/jpg", b"a/anim.gif",
        # A directory named like an image is walked.
        b"a/dir.jpg/in.png",
        # Hidden folders inside a class are walked (torchvision has no option).
        b"a/.ipynb_checkpoints/0-checkpoint.jpg", b"a/.git/x.png",
        # Classes sorted by code point: upper case first, then '-', '_', UTF-8.
        b"B/b.jpg", b"a-b/c.jpg", b"a_b/d.jpg", b"\xc3\xa9t\xc3\xa9/e.jpg", b"z/real.jpg",
        # Not UTF-8: fsdecoded names (surrogates) sort after U+4E00.
        b"a/\xff.jpg", b"a/\xc3x.jpg", b"a/\xe4\xb8\x80.jpg", b"a/\xe9dir/f.jpg", b"a/\xe9dir/\xfe.png",
        b"\xc3k/a.jpg", b"\xe4\xb8\x80k/a.jpg",
        # A non-empty hidden class at the root is a class for torchvision.
        b".cache/h.jpg",
        # Files at the root are no class.
        b"top.jpg", b"readme.txt",
    ]
    for rel in files:
        _write(root, rel)
    _link(root, os.fsencode(root / "z" / "real.jpg"), b"a/link.jpg")  # a symlinked file
    _link(root, b"../../../store", b"a/a/lnk")                         # a symlinked directory
    _link(root, os.fsencode(store), b"linkcls")                        # a class that is a link
    _link(root, b"nowhere.jpg", b"a/dangling.jpg")                     # listed by both
    _link(root, b"nowhere", b"dangling_class")                          # not a class
    return str(root)


def test_class_to_idx_and_samples_equal_torchvisions(tree):
    ours, theirs = _ours(tree), _theirs(tree)
    assert ours[0] == theirs[0]
    assert ours[1] == theirs[1]
    # The tree exercises what it claims to.
    paths = [p for p, _ in theirs[1]]
    a = os.path.join(tree, "a")
    assert paths.index(os.path.join(a, "a-b", "2.jpg")) < paths.index(os.path.join(a, "a", "x", "3.jpg"))
    assert os.path.join(tree, "linkcls", "deep", "s1.jpg") in paths
    assert os.path.join(a, "a", "lnk", "s0.png") in paths
    assert os.fsdecode(os.path.join(os.fsencode(a), b"\xff.jpg")) in paths
    assert ".cache" in theirs[0] and "\udcc3k" in theirs[0]


def test_a_path_like_or_trailing_slash_root_gives_the_same_paths(tree):
    import pathlib
    assert _ours(pathlib.Path(tree)) == _theirs(tree)
    assert _ours(tree + "/") == _theirs(tree + "/")


def test_skip_hidden_dirs_equals_torchvision_with_hidden_dirs_filtered_out(tree):
    class NoHidden(torchvision.datasets.ImageFolder):
        def find_classes(self, directory):
            classes = sorted(e.name for e in os.scandir(directory) if e.is_dir() and not e.name.startswith("."))
            return classes, {c: i for i, c in enumerate(classes)}

    def visible(path):
        parts = os.path.relpath(os.path.dirname(path), tree).split(os.sep)
        return has_file_allowed_extension(path, IMG_EXTENSIONS) and not any(p.startswith(".") for p in parts)

    theirs = NoHidden(tree, is_valid_file=visible)
    ours = _ours(tree, skip_hidden_dirs=True)
    assert ours == (theirs.class_to_idx, theirs.samples)
    assert ".cache" not in ours[0]
    assert not any("/.ipynb_checkpoints/" in p for p, _ in ours[1])
    assert any(p.endswith("/a/.png") for p, _ in ours[1])  # hidden files stay


def test_a_symlink_loop_is_listed_once_where_torchvision_repeats_it(tmp_path):
    root = str(tmp_path)
    for rel in [b"c/a.jpg", b"c/sub/b.jpg", b"d/x.png"]:
        _write(root, rel)
    _link(root, b"..", b"c/sub/up")  # c/sub/up -> c
    ours = _ours(root)
    theirs = _theirs(root)
    # os.walk(followlinks=True) descends c/sub/up/sub/up/... until ELOOP.
    looped = [s for s in theirs[1] if "/up/" in s[0]]
    assert len(looped) > 10
    assert ours[0] == theirs[0]
    assert ours[1] == [s for s in theirs[1] if "/up/" not in s[0]]


def test_an_empty_class_is_refused_as_torchvision_refuses_it(tmp_path):
    root = str(tmp_path)
    _write(root, b"a/x.jpg")
    _write(root, b"empty/sub/notes.txt")
    with pytest.raises(FileNotFoundError, match="Found no valid file for the classes empty"):
        _theirs(root)
    with pytest.raises(feedline.NotFoundError) as e:
        _ours(root)
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, feedline.Error)
    assert f"'empty' ('{os.path.join(root, 'empty')}')" in str(e.value)
    assert "skip_hidden_dirs" not in str(e.value)


def test_an_empty_ipynb_checkpoints_names_skip_hidden_dirs(tmp_path, feedline_bin):
    import subprocess
    root = str(tmp_path / "root")
    _write(root, b"a/x.jpg", _jpeg(1))
    _write(root, b"a/.ipynb_checkpoints/x-checkpoint.jpg", _jpeg(2))
    os.makedirs(os.path.join(root, ".ipynb_checkpoints"))
    with pytest.raises(FileNotFoundError, match=r"classes \.ipynb_checkpoints"):
        _theirs(root)
    with pytest.raises(feedline.NotFoundError, match=r"'\.ipynb_checkpoints' is a hidden directory: pass "
                                                       r"skip_hidden_dirs=True"):
        _ours(root)
    classes, samples = _ours(root, skip_hidden_dirs=True)
    assert classes == {"a": 0}
    assert samples == [(os.path.join(root, "a", "x.jpg"), 0)]
    # feedline pack refuses it the same way, and packs it with the option.
    out = str(tmp_path / "packed")
    r = subprocess.run([feedline_bin, "pack", root, out], capture_output=True, text=True)
    assert r.returncode != 0 and "--skip-hidden-dirs" in r.stderr and ".ipynb_checkpoints" in r.stderr
    r = subprocess.run([feedline_bin, "pack", root, out, "--skip-hidden-dirs"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with feedline.Loader(out, batch_size=1, num_threads=1, transform=feedline.transforms.imagenet_eval(16, 16)) as l:
        assert l.classes == ["a"] and len(l) == 1


def test_a_fifo_named_like_an_image_is_an_error_not_a_hang(tmp_path):
    root = str(tmp_path)
    _write(root, b"c/a.jpg")
    os.mkfifo(os.path.join(root, "c", "pipe.jpg"))
    with pytest.raises(feedline.InvalidArgumentError, match=r"pipe\.jpg' is a FIFO"):
        _ours(root)


def test_a_bad_sample_with_a_non_utf8_name_is_skipped_and_stats_keep_working(tmp_path):
    root = str(tmp_path)
    _write(root, b"c/0.jpg", _jpeg(0))
    _write(root, b"c/1 \xff bad.jpg", b"not a jpeg at all")
    _write(root, b"c/2.jpg", _jpeg(2))
    transform = feedline.transforms.imagenet_eval(16, 16)
    with feedline.Loader(root, batch_size=3, num_threads=1, max_errors=1, transform=transform) as loader:
        assert loader.samples[1][0] == os.fsdecode(os.path.join(os.fsencode(root), b"c/1 \xff bad.jpg"))
        batches = list(loader.batches())
        assert [len(b) for b in batches] == [2]
        assert len(batches[0].skipped) == 1 and "1 \ufffd bad.jpg" in batches[0].skipped[0]
        for _ in range(2):  # stats() keeps working after the bad name
            errors = loader.stats()["errors"]
            assert errors["skipped"] == 1
            assert "1 \ufffd bad.jpg" in errors["log"][0]
            assert sum(errors["by_reason"].values()) == 1
    # Fail-fast: a feedline.Error whose message names the file, never empty.
    with feedline.Loader(root, batch_size=3, num_threads=1, transform=transform) as loader:
        with pytest.raises(feedline.Error, match="1 \ufffd bad.jpg") as e:
            list(loader)
        assert "c/1 \ufffd bad.jpg" in str(e.value)
        loader.stats()
