"""`pip install .` works offline in a venv made with --system-site-packages
(the documented command), and the installed package loads data."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_pip_install_offline_into_a_venv(tmp_path, dataset):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    env = dict(os.environ, FEEDLINE_CMAKE_BUILD_DIR=str(ROOT / "build"), PIP_NO_INDEX="1")
    env.pop("PYTHONPATH", None)
    build = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", "-q",
                            str(ROOT)], env=env, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    check = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import feedline, sys; l = feedline.Loader(sys.argv[1], batch_size=8, num_threads=1); "
         "x, y = next(iter(l)); print(feedline.__file__); print('x'.join(map(str, x.shape)))", str(dataset)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr
    path, shape = check.stdout.split()
    assert str(venv) in path
    assert shape == "8x3x224x224"
