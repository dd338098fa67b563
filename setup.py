"""Builds feedline._C with CMake for `pip install .`.

Offline, with Debian's packages (see README):
    python3 -m venv --system-site-packages VENV
    VENV/bin/pip install --no-build-isolation --no-index .
FEEDLINE_CMAKE_BUILD_DIR=build reuses an already configured build directory
(only the extension target is built there).
"""
import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).parent.resolve()


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        reuse = os.environ.get("FEEDLINE_CMAKE_BUILD_DIR")
        build_dir = pathlib.Path(reuse).resolve() if reuse else pathlib.Path(self.build_temp).resolve() / "cmake"
        if not reuse:
            subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                                   f"-DPython_EXECUTABLE={sys.executable}", "-DFEEDLINE_BUILD_TESTS=OFF",
                                   "-DFEEDLINE_BUILD_BENCH=OFF"])
        subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "feedline_python",
                               "-j", str(os.cpu_count() or 1)])
        built = next((build_dir / "python" / "feedline").glob("_C*.so"))
        dest = pathlib.Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, dest)


setup(ext_modules=[CMakeExtension("feedline._C")], cmdclass={"build_ext": CMakeBuild})
