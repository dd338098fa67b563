"""clang-tidy over the compile database's src/ files, skipping a file whose
clean result is already known: `make lint-cc` (issue 34: CI's time).

A file's result depends on the exact text the compiler sees, the flags, the
checks and the tool. So its key is a hash of clang-tidy's version, the
.clang-tidy file, the compile command and the file preprocessed with that
command (`-E -P`: every header's text included, line markers left out), with
the clone's path replaced by a placeholder so that a fresh clone of the same
tree hits. A clean run is remembered under $FEEDLINE_CACHE/tidy/<key> (default
~/.cache/feedline); a finding is never cached, so a file with one is checked
again every time, and a file or header that changes is a new key. Preprocessing
a file costs a fraction of analysing it.

    python3 scripts/tidy-cached.py BUILD_DIR [--jobs N] [--under src/]

Exit status 1 when clang-tidy reports anything (WarningsAsErrors), with its
output; the summary says how many files were analysed and how many were known
clean.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import pathlib
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import envcache  # noqa: E402

PLACEHOLDER = b"@FEEDLINE_ROOT@"


def tool_version(tidy):
    return subprocess.run([tidy, "--version"], capture_output=True, check=True).stdout


def compile_args(entry):
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a == "-c":
            continue
        out.append(a)
    return out


def key_of(entry, salt):
    args = compile_args(entry)
    root = str(ROOT).encode()
    pre = subprocess.run([*args, "-E", "-P", "-o", "-"], cwd=entry["directory"], capture_output=True)
    if pre.returncode != 0:
        return None  # let clang-tidy say what is wrong
    h = hashlib.sha256(salt)
    h.update(" ".join(args).encode().replace(root, PLACEHOLDER))
    h.update(b"\0")
    h.update(pre.stdout.replace(root, PLACEHOLDER))
    return h.hexdigest()


def check(entry, tidy, build_dir, cache, salt):
    key = key_of(entry, salt)
    if key is not None and (cache / key).exists():
        return entry["file"], "cached", ""
    p = subprocess.run([tidy, "-p", build_dir, "-quiet", entry["file"]], capture_output=True, text=True)
    if p.returncode != 0:
        return entry["file"], "failed", p.stdout + p.stderr
    if key is not None:
        cache.mkdir(parents=True, exist_ok=True)
        (cache / key).write_text(os.path.relpath(entry["file"], ROOT) + "\n")
    return entry["file"], "clean", ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--under", default="src/")
    ap.add_argument("--tidy", default="clang-tidy")
    a = ap.parse_args()
    db = json.loads((pathlib.Path(a.build_dir) / "compile_commands.json").read_text())
    under = str(ROOT / a.under)
    entries = [e for e in db if os.path.abspath(e["file"]).startswith(under)]
    salt = tool_version(a.tidy) + b"\0" + (ROOT / ".clang-tidy").read_bytes() + b"\0"
    cache = envcache.cache_root() / "tidy"
    counts = {"cached": 0, "clean": 0, "failed": 0}
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for file, result, output in pool.map(lambda e: check(e, a.tidy, a.build_dir, cache, salt), entries):
            counts[result] += 1
            if result == "failed":
                print(f"clang-tidy: {os.path.relpath(file, ROOT)}:\n{output}", flush=True)
    print(f"clang-tidy: {len(entries)} files under {a.under}: {counts['clean']} analysed clean, "
          f"{counts['cached']} known clean from an earlier run (cache {cache}), {counts['failed']} with findings")
    sys.exit(1 if counts["failed"] else 0)


if __name__ == "__main__":
    main()
