"""What the benchmark scripts share: reading /proc (procfs) and writing
results (results). Standard library only: the scripts import this by path
from Debian's python3, from the peers' virtual environments and on the GPU
machine (a copy of the repository tree), so it must run on each of them.

    ROOT = pathlib.Path(__file__).resolve().parents[N]  # the repository root
    sys.path.insert(0, str(ROOT))
    from bench.common import procfs, results
"""
