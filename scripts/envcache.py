"""Virtual environments kept outside the clone, keyed by what they hold.

CI runs on a fresh clone every time; a venv with torch in it is ~5.5 GB and
minutes to install, so the environments live in a cache folder beside the
clone's life, not in it:

    $FEEDLINE_CACHE (default ~/.cache/feedline)/venvs/<name>-<key>/

where <key> is a hash of the interpreter (its resolved path and version),
the pip arguments, and the bytes of every requirements file they name (-r).
A change to any of them is a new key, so a stale venv is never reused, and
an old one is simply not looked at again (`prune` removes those unused for
30 days; each use touches the marker). A venv is complete only once its
`.installed` marker is written, after every pip install succeeded; a folder
without the marker (an install that was killed) is removed and made again, so
a new machine, or a broken cache, still gets a working environment. Two
processes asking for the same venv at once (CI's steps overlap) take a lock
file: one installs, the other waits and reuses.

    python3 scripts/envcache.py path NAME [--python PY] [--system-site-packages] -- PIPARGS [++ PIPARGS ...]
    python3 scripts/envcache.py make NAME [same]        # prints the path once it is ready
    python3 scripts/envcache.py prune

Each `++`-separated group is one `pip install` run, in order (the lint venv
installs torch without its dependencies after the rest). Standard library
only: it runs before any venv exists.
"""
import argparse
import fcntl
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

MARKER = ".installed"


def cache_root():
    root = os.environ.get("FEEDLINE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "feedline")
    return pathlib.Path(root)


def venvs_root():
    return cache_root() / "venvs"


def split_groups(args):
    groups, cur = [], []
    for a in args:
        if a == "++":
            if cur:
                groups.append(cur)
            cur = []
        else:
            cur.append(a)
    if cur:
        groups.append(cur)
    return groups


def interpreter_identity(python):
    """The interpreter's resolved path and full version: a venv is tied to
    the Python that made it."""
    out = subprocess.run([python, "-c", "import sys, os; print(os.path.realpath(sys.executable)); print(sys.version)"],
                         check=True, capture_output=True, text=True).stdout
    return out


def key_of(python, groups, system_site):
    h = hashlib.sha256()
    h.update(interpreter_identity(python).encode())
    h.update(b"system-site-packages" if system_site else b"isolated")
    for g in groups:
        h.update(b"\0group")
        it = iter(g)
        for a in it:
            h.update(b"\0" + a.encode())
            if a in ("-r", "--requirement", "-c", "--constraint"):
                f = next(it)
                h.update(b"\0" + pathlib.Path(f).read_bytes())
    return h.hexdigest()[:16]


def venv_path(name, python, groups, system_site):
    return venvs_root() / f"{name}-{key_of(python, groups, system_site)}"


def make(name, python, groups, system_site, log):
    path = venv_path(name, python, groups, system_site)
    if (path / MARKER).exists():
        os.utime(path / MARKER)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "w") as lock:
        t_wait = time.monotonic()
        fcntl.flock(lock, fcntl.LOCK_EX)
        waited = time.monotonic() - t_wait
        if (path / MARKER).exists():  # another process made it while this one waited
            if waited > 1:
                log(f"envcache: {path.name} was made by another step ({waited:.0f} s waited)")
            return path
        if path.exists():
            log(f"envcache: {path} has no {MARKER} (an install that did not finish): made again")
            shutil.rmtree(path)
        t0 = time.monotonic()
        log(f"envcache: making {path} ({name}; not in the cache)")
        cmd = [python, "-m", "venv", str(path)] + (["--system-site-packages"] if system_site else [])
        subprocess.run(cmd, check=True)
        env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
        for g in groups:
            p = subprocess.run([str(path / "bin" / "pip"), "install", "-q", *g], env=env)
            if p.returncode != 0:
                shutil.rmtree(path, ignore_errors=True)
                raise SystemExit(f"envcache: `pip install {' '.join(g)}` for {name} failed with exit {p.returncode}")
        (path / MARKER).write_text(json.dumps({"name": name, "pip": groups, "python": python,
                                               "seconds": round(time.monotonic() - t0, 1)}) + "\n")
        log(f"envcache: {path.name} ready in {time.monotonic() - t0:.0f} s")
    return path


def prune(log):
    """Removes cached venvs older than 30 days that are not in use now (no
    lock held): the cache's only growth is one venv per requirements change."""
    root = venvs_root()
    if not root.exists():
        return
    now = time.time()
    for d in sorted(root.iterdir()):
        if not d.is_dir():
            continue
        marker = d / MARKER
        age = now - (marker.stat().st_mtime if marker.exists() else d.stat().st_mtime)
        if age > 30 * 86400:
            log(f"envcache: removing {d} ({age / 86400:.0f} days old)")
            shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["path", "make", "prune"])
    ap.add_argument("name", nargs="?")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--system-site-packages", action="store_true")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    pip = argv[cut + 1:]
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    if a.cmd == "prune":
        prune(log)
        return
    groups = split_groups(pip)
    if not a.name or not groups:
        ap.error("path/make need NAME and pip arguments after --")
    python = shutil.which(a.python) or a.python
    if a.cmd == "path":
        print(venv_path(a.name, python, groups, a.system_site_packages))
    else:
        print(make(a.name, python, groups, a.system_site_packages, log))


if __name__ == "__main__":
    main()
