"""Builds feedline._C with CMake for `pip install .` (PEP 517, setuptools).

Into a fresh virtual environment, dependencies from PyPI (README):
    python3 -m venv VENV
    VENV/bin/pip install .
Offline, with Debian's torch and numpy (no pyarrow: Parquet sources left out):
    /usr/bin/python3 -m venv --system-site-packages VENV
    VENV/bin/pip install --no-build-isolation --no-index --no-deps .
Either way the C++ libraries come from Debian (scripts/install-deps.sh) and
CMake >= 3.25 from PATH. FEEDLINE_CMAKE_BUILD_DIR=build reuses an already
configured build directory (only the extension target is built there).
"""
import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).parent.resolve()


def cmake_args():
    """Configures the extension for the interpreter running this build (the
    build-isolation environment's python is the target venv's)."""
    args = ["-DCMAKE_BUILD_TYPE=Release", f"-DPython_EXECUTABLE={sys.executable}",
            "-DFEEDLINE_BUILD_TESTS=OFF", "-DFEEDLINE_BUILD_BENCH=OFF", "-DFEEDLINE_BUILD_LIBTORCH_EXAMPLE=OFF"]
    try:  # pybind11 from build-system.requires; without it (offline), Debian's pybind11-dev
        import pybind11
        args.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
    except ImportError:
        pass
    try:  # Arrow C++ from build-system.requires' pyarrow; without it, no Parquet sources (a clear error)
        import pyarrow
        args.append(f"-DFEEDLINE_PYARROW_DIR={os.path.dirname(pyarrow.__file__)}")
    except ImportError:
        pass
    return args


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        reuse = os.environ.get("FEEDLINE_CMAKE_BUILD_DIR")
        build_dir = pathlib.Path(reuse).resolve() if reuse else pathlib.Path(self.build_temp).resolve() / "cmake"
        cmake = shutil.which("cmake")
        if cmake is None:
            raise RuntimeError("feedline's build needs CMake >= 3.25 on PATH (Debian: apt-get install cmake, "
                               "or scripts/install-deps.sh)")
        if not reuse:
            subprocess.check_call([cmake, "-S", str(ROOT), "-B", str(build_dir), *cmake_args()])
        subprocess.check_call([cmake, "--build", str(build_dir), "--target", "feedline_python",
                               "-j", str(os.cpu_count() or 1)])
        built = next((build_dir / "python" / "feedline").glob("_C*.so"))
        dest = pathlib.Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, dest)


# build/pip, not setuptools' default build/: that is the CMake build tree (Makefile).
setup(ext_modules=[CMakeExtension("feedline._C")], cmdclass={"build_ext": CMakeBuild},
      options={"build": {"build_base": "build/pip"}})
