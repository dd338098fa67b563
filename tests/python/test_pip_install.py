"""`pip install .` works offline in a venv made with --system-site-packages
(the README's offline command, with Debian's torch), and the installed
package loads data. Under a venv interpreter (make test-torch2) the new venv
sees that venv's packages instead (a .pth file): a venv's packages are not
"system" ones for a venv made from it. The online, build-isolated install of
a new user is scripts/check-pip-install.sh (make test-pip-install)."""
import os
import pathlib
import subprocess
import sys
import sysconfig

import feedline

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The build directory of the package under test (build/python/feedline ->
# build), configured for this interpreter.
BUILD = pathlib.Path(feedline.__file__).resolve().parents[2]


def test_pip_install_offline_into_a_venv(tmp_path, dataset):
    venv = tmp_path / "venv"
    in_venv = sys.prefix != sys.base_prefix
    # From a venv, the new one has no pip or setuptools of its own, which would
    # shadow the outer venv's (torch 2.14 requires setuptools >= 77.0.3).
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", *(["--without-pip"] if in_venv else []),
                    str(venv)], check=True)
    if in_venv:
        site = next((venv / "lib").glob("python3*/site-packages"))
        (site / "outer_venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = dict(os.environ, FEEDLINE_CMAKE_BUILD_DIR=str(BUILD), PIP_NO_INDEX="1")
    env.pop("PYTHONPATH", None)
    # --no-deps: the dependencies are the system's (Debian has no pyarrow; the
    # build directory reused here links the one the build found).
    build = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-build-isolation", "--no-index",
                            "--no-deps", "-q", str(ROOT)], env=env, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    check = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import feedline, sys, torch; l = feedline.Loader(sys.argv[1], batch_size=8, num_threads=1); "
         "x, y = next(iter(l)); print(feedline.__file__); print('x'.join(map(str, x.shape))); "
         "print(torch.__version__)", str(dataset)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr
    path, shape, torch_version = check.stdout.split()
    assert str(venv) in path
    assert shape == "8x3x224x224"
    import torch
    assert torch_version == torch.__version__  # the installed package runs on the torch under test
