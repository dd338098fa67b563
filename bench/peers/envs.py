"""Virtual environments for the peers of `make bench-peers`, one per peer,
each from its pinned bench/peers/requirements-<env>.txt, kept outside the
clone in $FEEDLINE_CACHE/peers (scripts/envcache.py: ~/.cache/feedline), as
venv-<env>-<key> with <key> a hash of the interpreter and the requirements.

Idempotent and cached: an environment whose requirements file is unchanged
since its last set-up (success or failure) is not touched again, by this
clone or the next; a failure is
kept with pip's exact error, so the runner lists the peer with it instead of
dropping it, and CI does not retry a build that cannot succeed here
(`--retry-failed` does). Also builds feedline's Python extension for the torch
environment's interpreter (build-peers/ in the clone: from the clone's own
source), so feedline is measured from the same Python as the torch peers.

    python3 bench/peers/envs.py [--only torch,tf] [--retry-failed] [--venvs-only]
"""
import argparse
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = ROOT / "bench" / "peers"
sys.path.insert(0, str(ROOT / "scripts"))
import envcache  # noqa: E402

OUT = envcache.cache_root() / "peers"
# At the top of the clone, like build/ and build-torch2/: the compiler's
# cache (ccache, base_dir = the clone) then serves its objects from theirs.
FEEDLINE_BUILD = ROOT / "build-peers"

# name -> environment whose site-packages this one sees after its own (a .pth
# file), so torch is not installed twice (5.5 GB).
BASE = {"pillow-simd": "torch", "ffcv": "torch"}
ENVS = ["torch", "pillow-simd", "dali", "spdl", "tf", "ffcv", "grain"]


def venv_dir(name):
    return OUT / f"venv-{name}-{requirements_hash(name)[:16]}"


def python_of(name):
    return venv_dir(name) / "bin" / "python"


def status_path(name):
    return OUT / f"status-{name}-{requirements_hash(name)[:16]}.json"


def load_status(name):
    try:
        return json.loads(status_path(name).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def requirements_hash(name):
    """The interpreter making the venvs (path and version) and the pinned
    requirements, with those of the base environment it sees."""
    h = hashlib.sha256(f"{os.path.realpath(sys.executable)}\n{sys.version}\n".encode())
    h.update((HERE / f"requirements-{name}.txt").read_bytes())
    if name in BASE:
        h.update((HERE / f"requirements-{BASE[name]}.txt").read_bytes())
    return h.hexdigest()


def site_packages(name):
    out = subprocess.run([str(python_of(name)), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True)
    return pathlib.Path(out.stdout.strip())


def pip_error(text):
    """The lines of pip's output that say what failed (pip's own `error:`
    block and the compiler's), without the noise of a local index's warnings."""
    lines = [l for l in text.splitlines() if l.strip() and not l.startswith("WARNING: Location")]
    keep = [i for i, l in enumerate(lines) if "error" in l.lower() or "ERROR" in l]
    if not keep:
        return "\n".join(lines[-15:])
    first = max(0, keep[0] - 2)
    picked = lines[first:first + 40]
    return "\n".join(picked)


def pip_env(name):
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    if name == "pillow-simd":
        # pillow-simd's README: build with AVX2 where the CPU has it.
        with open("/proc/cpuinfo") as f:
            if " avx2" in f.read():
                env["CC"] = "cc -mavx2"
    return env


def setup(name, retry_failed=False, log=print):
    st = setup_venv(name, retry_failed, log)
    if st["ok"] and name == "torch":
        # The venv is cached across clones, feedline's build is this clone's
        # (incremental: a no-op when up to date).
        ok, error = build_feedline(log)
        if not ok:
            st = dict(st, ok=False, error=error)
    return st


def setup_venv(name, retry_failed=False, log=print):
    want = requirements_hash(name)
    st = load_status(name)
    if st and st.get("requirements") == want and (st["ok"] or not retry_failed):
        return st
    if name in BASE:
        base = setup_venv(BASE[name], retry_failed, log)
        if not base["ok"]:
            st = {"name": name, "ok": False, "requirements": want, "seconds": 0.0,
                  "error": f"needs venv-{BASE[name]}, which failed: {base['error'].splitlines()[0]}"}
            status_path(name).write_text(json.dumps(st, indent=1))
            return st
    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    log(f"[envs] setting up venv-{name} (pip install -r bench/peers/requirements-{name}.txt)")
    vd = venv_dir(name)
    if not python_of(name).exists():
        subprocess.run([sys.executable, "-m", "venv", str(vd)], check=True)
    cmd = [str(python_of(name)), "-m", "pip", "install", "-r", str(HERE / f"requirements-{name}.txt")]
    p = subprocess.run(cmd, capture_output=True, text=True, env=pip_env(name))
    (OUT / f"pip-{name}-{want[:16]}.log").write_text(p.stdout + p.stderr)
    ok = p.returncode == 0
    error = "" if ok else (f"`pip install -r bench/peers/requirements-{name}.txt` exit {p.returncode}:\n" +
                           pip_error(p.stdout + p.stderr))
    if ok and name in BASE:
        (site_packages(name) / f"zz-base-{BASE[name]}.pth").write_text(str(site_packages(BASE[name])) + "\n")
    st = {"name": name, "ok": ok, "requirements": want, "seconds": round(time.monotonic() - t0, 1), "error": error}
    status_path(name).write_text(json.dumps(st, indent=1))
    log(f"[envs] venv-{name}: {'ok' if ok else 'FAILED'} in {st['seconds']:.0f} s" + ("" if ok else "\n" + error))
    return st


def cmake():
    # CMake 4 first on PATH refuses some of our dependencies' old
    # cmake_minimum_required; Debian's 3.25 is what the project is built with.
    return "/usr/bin/cmake" if os.path.exists("/usr/bin/cmake") else shutil.which("cmake")


def build_feedline(log=print):
    """feedline's extension and CLI for venv-torch's interpreter."""
    py = str(python_of("torch"))
    try:
        pybind_dir = subprocess.run([py, "-m", "pybind11", "--cmakedir"], check=True, capture_output=True,
                                    text=True).stdout.strip()
        jobs = str(os.cpu_count() or 2)
        for cmd in ([cmake(), "-S", str(ROOT), "-B", str(FEEDLINE_BUILD), "-DCMAKE_BUILD_TYPE=Release",
                     f"-DPython_EXECUTABLE={py}", f"-Dpybind11_DIR={pybind_dir}", "-DFEEDLINE_BUILD_TESTS=OFF",
                     "-DFEEDLINE_BUILD_BENCH=OFF", "-DFEEDLINE_BUILD_LIBTORCH_EXAMPLE=OFF",
                     # as the Makefile's builds (WERROR under CI): the same flags, so ccache serves theirs
                     f"-DFEEDLINE_WERROR={'ON' if os.environ.get('CI') else 'OFF'}"],
                    [cmake(), "--build", str(FEEDLINE_BUILD), "-j", jobs, "--target", "feedline_python",
                     "feedline_cli"]):
            log("[envs] " + " ".join(cmd))
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                return False, f"`{' '.join(cmd)}` exit {p.returncode}:\n" + pip_error(p.stdout + p.stderr)
    except subprocess.CalledProcessError as e:
        return False, f"{e.cmd}: {e.stderr}"
    return True, ""


def feedline_pythonpath():
    return str(FEEDLINE_BUILD / "python")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=",".join(ENVS))
    ap.add_argument("--retry-failed", action="store_true")
    ap.add_argument("--venvs-only", action="store_true",
                    help="only the environments, not feedline's build (CI makes them beside its compiles)")
    a = ap.parse_args()
    for name in a.only.split(","):
        (setup_venv if a.venvs_only else setup)(name, a.retry_failed)
    for name in ENVS:
        st = load_status(name)
        print(f"venv-{name}: " + ("not set up" if st is None else "ok" if st["ok"] else "FAILED: " +
                                  st["error"].splitlines()[0]))


if __name__ == "__main__":
    main()
