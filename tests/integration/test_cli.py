"""The `feedline` CLI's front door and its file-system edges: every
subcommand (as `feedline --help` lists them, so a new one cannot be
forgotten) answers --help / -h with its usage on stdout, exit 0 and no work
done, and an unknown option with exit 2 and the usage on stderr; and every
command that reads a folder or a file survives symlink loops, fifos and
folders named like images: success with the regular images or a clear error
naming the offending path, never a crash (abort, uncaught exception) or a
hang. Each subprocess runs under a timeout (the hang guard)."""
import json
import os
import re
import subprocess

import pytest

TIMEOUT_S = int(os.environ.get("CLI_TIMEOUT", 120))


def run(feedline_bin, *args, cwd=None):
    try:
        return subprocess.run([feedline_bin, *map(str, args)], capture_output=True, text=True, timeout=TIMEOUT_S,
                              cwd=cwd)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"feedline {' '.join(map(str, args))} hung (no answer in {TIMEOUT_S} s)") from e


@pytest.fixture(scope="module")
def commands(feedline_bin):
    top = run(feedline_bin, "--help")
    assert top.returncode == 0, top.stderr
    assert top.stdout.startswith("usage:")
    section = top.stdout.split("commands:\n", 1)[1]
    names = [m.group(1) for m in re.finditer(r"^  (\S+)", section, re.M)]
    assert {"pack", "verify", "inspect", "bench-read", "demo"} <= set(names), names
    return names


def test_top_level_help_lists_the_commands(feedline_bin, commands):
    for args in (["--help"], ["-h"], ["help"]):
        p = run(feedline_bin, *args)
        assert p.returncode == 0 and p.stdout.startswith("usage: feedline <command>"), (args, p.stderr)
        assert all(f"\n  {c} " in p.stdout for c in commands), (args, p.stdout)
    bare = run(feedline_bin)
    assert bare.returncode == 2 and "usage:" in bare.stderr and bare.stdout == ""
    unknown = run(feedline_bin, "no-such-command")
    assert unknown.returncode == 2 and "unknown command 'no-such-command'" in unknown.stderr
    assert "usage:" in unknown.stderr


def test_every_command_prints_its_usage_and_does_nothing_else(feedline_bin, commands, tmp_path):
    for c in commands:
        # Positionals before --help would be real work without it (OUT made,
        # a dataset generated, a demo run): the folder must stay empty.
        for args in ([c, "--help"], [c, "-h"], [c, tmp_path / "a", tmp_path / "b", "--help"], ["help", c]):
            p = run(feedline_bin, *args, cwd=tmp_path)
            assert p.returncode == 0, (args, p.returncode, p.stderr)
            assert "usage" in p.stdout.lower() and f"feedline {c}" in p.stdout, (args, p.stdout)
            assert list(tmp_path.iterdir()) == [], (args, list(tmp_path.iterdir()))


def help_options(text):
    """(--option, placeholder or None) for each option line of a usage text
    (ours, or argparse's for the doctor)."""
    out = []
    for m in re.finditer(r"^  (--[a-z][\w-]*)(?: (\S+))?(?=  |\n)", text, re.M):
        out.append((m.group(1), m.group(2)))
    return out


def test_every_option_the_help_shows_is_accepted(feedline_bin, commands, tmp_path):
    # The parser and the help come from one table: an option the help lists
    # but the parser refused would exit 2 here before reaching --help.
    for c in commands:
        text = run(feedline_bin, c, "--help").stdout
        options = help_options(text)
        assert options or c in ("verify", "inspect"), (c, text)
        for name, value in options:
            args = [c, name] + ([value.strip("{}").split(",")[0] if value.startswith("{") else "1"] if value else [])
            p = run(feedline_bin, *args, "--help", cwd=tmp_path)
            assert p.returncode == 0, (args, p.stderr)


def test_unknown_option_is_a_usage_error(feedline_bin, commands, tmp_path):
    for c in commands:
        p = run(feedline_bin, c, "--no-such-option", tmp_path / "x", cwd=tmp_path)
        assert p.returncode == 2, (c, p.returncode, p.stdout, p.stderr)
        assert "usage" in p.stderr.lower() and "--no-such-option" in p.stderr, (c, p.stderr)
        assert list(tmp_path.iterdir()) == [], c


def test_a_bad_value_is_an_error_not_an_exception(feedline_bin):
    # demo parsed its numbers with std::stoull: "abc" aborted the process.
    p = run(feedline_bin, "demo", "--samples", "abc")
    assert p.returncode == 1 and "--samples" in p.stderr and "abc" in p.stderr, p.stderr


# ---------------------------------------------------------------------------
# A tree with everything a real dataset folder can hold by accident.

REGULAR_IMAGES = 6


@pytest.fixture(scope="module")
def bad_tree(tmp_path_factory, gen_dataset):
    """root/class_0000 and root/class_0001 with 3 real images each, plus:
    class_0000/loop -> . , class_0000/a -> b -> a, a fifo class_0001/x.jpg,
    a folder class_0001/y.jpg/, and a self-loop root/zz -> zz."""
    root = gen_dataset(tmp_path_factory.mktemp("bad") / "root", REGULAR_IMAGES, 2)
    os.symlink(".", root / "class_0000" / "loop")
    os.symlink("b", root / "class_0000" / "a")
    os.symlink("a", root / "class_0000" / "b")
    os.mkfifo(root / "class_0001" / "x.jpg")
    (root / "class_0001" / "y.jpg").mkdir()
    os.symlink("zz", root / "zz")
    return root


OFFENDERS = ("class_0000/loop", "class_0000/a", "class_0000/b", "class_0001/x.jpg", "class_0001/y.jpg", "root/zz")


def assert_no_crash(p, command, offenders=OFFENDERS):
    """Either success, or exit 1 with 'feedline COMMAND: ...' naming an
    offending path; never a signal (abort is -6 from subprocess, 134 from a
    shell) nor an uncaught exception's terminate()."""
    assert p.returncode >= 0 and p.returncode != 134, (command, p.returncode, p.stderr)
    assert "terminate called" not in p.stderr, p.stderr
    if p.returncode != 0:
        assert p.returncode == 1, (command, p.returncode, p.stderr)
        assert p.stderr.startswith(f"feedline {command}:"), p.stderr
        assert any(o in p.stderr for o in offenders), (command, p.stderr)


def test_pack_verify_inspect_on_a_tree_with_loops_fifos_and_folders(feedline_bin, bad_tree, tmp_path):
    out = tmp_path / "packed"
    p = run(feedline_bin, "pack", bad_tree, out, "--threads", 1)
    assert_no_crash(p, "pack")
    if p.returncode == 0:
        assert f"packed {REGULAR_IMAGES} records" in p.stdout, p.stdout
        v = run(feedline_bin, "verify", out)
        assert v.returncode == 0 and f"OK: {REGULAR_IMAGES} records" in v.stdout, (v.stdout, v.stderr)
        i = run(feedline_bin, "inspect", out)
        assert i.returncode == 0 and f"records {REGULAR_IMAGES}" in i.stdout, (i.stdout, i.stderr)
        b = run(feedline_bin, "bench-read", out, "--passes", 1, "--threads", 1)
        assert b.returncode == 0 and json.loads(b.stdout)["samples"] == REGULAR_IMAGES, b.stderr
    # The tree itself is no packed dataset: a named error, exit 1.
    for command in ("verify", "inspect"):
        q = run(feedline_bin, command, bad_tree)
        assert q.returncode == 1 and "manifest" in q.stderr and str(bad_tree) in q.stderr, (command, q.stderr)


def test_loaders_on_a_tree_with_loops_fifos_and_folders(feedline_bin, bad_tree, tmp_path):
    b = run(feedline_bin, "bench-read", bad_tree, "--passes", 1, "--threads", 1)
    assert_no_crash(b, "bench-read")
    if b.returncode == 0:
        assert json.loads(b.stdout)["samples"] == REGULAR_IMAGES, b.stdout
    for mode in ("pipeline", "decode"):
        p = run(feedline_bin, "bench-pipeline", bad_tree, "--mode", mode, "--threads", 1, "--batch", 2,
                "--batches", 1, "--warmup", 0)
        assert_no_crash(p, "bench-pipeline")
        if p.returncode == 0:
            assert json.loads(p.stdout)["images"] > 0, p.stdout
    d = run(feedline_bin, "demo", "--data", bad_tree, "--threads", 1, cwd=tmp_path)
    assert_no_crash(d, "demo")
    if d.returncode == 0:
        assert f"{REGULAR_IMAGES} images in 2 classes" in d.stdout, d.stdout


def test_doctor_on_a_tree_with_loops_fifos_and_folders(feedline_bin, bad_tree, tmp_path):
    p = run(feedline_bin, "doctor", bad_tree, "--threads", 1, "--batch-size", 2, "--batches", 1, "--warmup", 0,
            "--quiet", cwd=tmp_path)
    # The doctor is Python: an exception is a traceback and exit 1, a crash a signal.
    assert p.returncode >= 0 and p.returncode != 134, (p.returncode, p.stderr)
    assert "terminate called" not in p.stderr, p.stderr
    if p.returncode != 0:
        assert any(o in p.stderr for o in OFFENDERS), p.stderr


def test_a_fifo_or_folder_named_like_an_image_is_refused_not_opened(feedline_bin, bad_tree, tmp_path):
    fifo, folder = bad_tree / "class_0001" / "x.jpg", bad_tree / "class_0001" / "y.jpg"
    loop = bad_tree / "class_0000" / "a"
    for path, what in ((fifo, "fifo"), (folder, "directory"), (loop, "symlink loop")):
        p = run(feedline_bin, "image", "info", path)  # opening the fifo blocked until a writer came
        assert p.returncode == 1 and str(path) in p.stderr and what in p.stderr, (path, p.stderr)
        q = run(feedline_bin, "image", "transform", path, tmp_path / "out.bin")
        assert q.returncode == 1 and str(path) in q.stderr, (path, q.stderr)
    real = next((bad_tree / "class_0001").glob("img_*"))
    r = run(feedline_bin, "image", "transform", real, fifo)  # OUT a fifo: writing would block too
    assert r.returncode == 1 and str(fifo) in r.stderr and "fifo" in r.stderr, r.stderr

    # A list naming them: pack names the first bad entry.
    for bad in (fifo, folder, loop):
        lst = tmp_path / "list.csv"
        lst.write_text(f"path,label\n{real},0\n{bad},1\n")
        p = run(feedline_bin, "pack", lst, tmp_path / "out", "--overwrite")
        assert p.returncode == 1 and str(bad) in p.stderr, (bad, p.stderr)

    # The list itself a fifo, or a loop.
    lst = tmp_path / "list-fifo.csv"
    os.mkfifo(lst)
    for src in (lst, bad_tree / "zz"):
        p = run(feedline_bin, "pack", src, tmp_path / "out2")
        assert p.returncode == 1 and str(src) in p.stderr, (src, p.stderr)

    # gen-dataset's photographs.
    photos = tmp_path / "photos"
    photos.mkdir()
    os.mkfifo(photos / "p.jpg")
    p = run(feedline_bin, "gen-dataset", tmp_path / "gen", "--images", 2, "--photos", photos)
    assert p.returncode == 1 and str(photos / "p.jpg") in p.stderr and "fifo" in p.stderr, p.stderr


def test_a_packed_dataset_whose_manifest_is_a_fifo_is_refused(feedline_bin, bad_tree, tmp_path):
    ds = tmp_path / "ds"
    ds.mkdir()
    os.mkfifo(ds / "manifest.json")
    for args in (["verify", ds], ["inspect", ds], ["bench-read", ds, "--passes", 1]):
        p = run(feedline_bin, *args)
        assert p.returncode == 1 and "manifest.json" in p.stderr and "fifo" in p.stderr, (args, p.stderr)
    # The parts --merge joins.
    os.unlink(ds / "manifest.json")
    os.mkfifo(ds / "manifest.part-0-of-1.json")
    p = run(feedline_bin, "pack", "--merge", ds)
    assert p.returncode == 1 and "manifest.part-0-of-1.json" in p.stderr and "fifo" in p.stderr, p.stderr


def test_pack_output_that_is_not_a_folder_is_a_named_error(feedline_bin, gen_dataset, bad_tree, tmp_path):
    clean = gen_dataset(tmp_path / "clean", 2, 1)
    for out in (bad_tree / "class_0001" / "x.jpg", bad_tree / "zz"):
        p = run(feedline_bin, "pack", clean, out)
        assert_no_crash(p, "pack", offenders=(str(out),))
        assert p.returncode == 1, p.stdout


def test_verify_checks_every_block_of_token_shards(feedline_bin, tmp_path):
    # Token shards written by the same writer pack-text uses: 3 blocks of
    # 2^16 ids; verify reads them all, then lists the one block a flipped
    # byte broke, by shard, block and token range, and exits 1.
    np = pytest.importorskip("numpy")
    from feedline import _C

    out = tmp_path / "tok"
    w = _C.TokenShardWriter(os.fsencode(out), 1000, 1 << 28, json.dumps({"name": "test"}), json.dumps({}))
    ids = (np.arange(3 << 16) % 1000).astype(np.int64)
    w.add_documents(ids, np.array([len(ids)], dtype=np.int64))
    w.finish()
    ok = run(feedline_bin, "verify", out)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert f"OK: {3 << 16} tokens in 3 blocks of 1 shards checked, 0 problems" in ok.stdout

    shard = out / "tokens-00000.flt"
    b = bytearray(shard.read_bytes())
    b[64 + 2 * ((1 << 16) + 5)] ^= 1  # after the 64-byte header: block 1
    shard.write_bytes(bytes(b))
    bad = run(feedline_bin, "verify", out)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    lines = [ln for ln in bad.stdout.splitlines() if ln.startswith("BAD ")]
    assert len(lines) == 1 and str(shard) in lines[0], bad.stdout
    assert "block_crcs[1] (tokens [65536, 131072)) checksum mismatch" in lines[0]
    assert "FAILED: 196608 tokens in 3 blocks of 1 shards checked, 1 problems" in bad.stdout
