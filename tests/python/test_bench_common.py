"""bench/common: the /proc readers and the results writer every benchmark
script shares, against this machine's real /proc and real child processes."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.common import procfs, results  # noqa: E402

MIB = 2**20


def _child(code, *args, executable=None):
    """A Python child that runs code, prints 'ready' and waits for stdin to
    close; returned once it is ready."""
    argv = [sys.executable, "-c", code + "\nprint('ready', flush=True)\nimport sys\nsys.stdin.read()", *args]
    proc = subprocess.Popen(argv, executable=executable, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _finish(proc):
    proc.stdin.close()
    proc.wait(timeout=60)


@pytest.fixture
def family():
    """A child that has a grandchild (both waiting)."""
    grandchild = ("import subprocess, sys\n"
                  "g = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'],\n"
                  "                     stdin=subprocess.PIPE)\n"
                  "print(g.pid, flush=True)")
    proc = subprocess.Popen([sys.executable, "-c", grandchild + "\nimport sys\nsys.stdin.read()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    gpid = int(proc.stdout.readline())
    yield proc.pid, gpid
    _finish(proc)  # the grandchild's stdin closes with its parent's exit


def test_tree_pids_holds_children_and_grandchildren(family):
    child, grandchild = family
    mine = procfs.tree_pids(os.getpid())
    assert mine[0] == os.getpid()
    assert child in mine and grandchild in mine
    assert procfs.tree_pids(child) == [child, grandchild]


def test_tree_pids_by_scan_agrees_with_children_files(family, monkeypatch):
    child, grandchild = family
    monkeypatch.setattr(procfs, "_has_children_files", lambda pid: False)
    assert procfs.tree_pids(child) == [child, grandchild]
    assert {child, grandchild} <= set(procfs.tree_pids(os.getpid()))


def test_readings_of_an_exited_process_are_empty():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert procfs.tree_pids(proc.pid) == [proc.pid]
    assert procfs.cpu_seconds([proc.pid]) == 0.0
    assert procfs.process_cpu_seconds(proc.pid) is None
    assert procfs.pss_bytes([proc.pid]) == 0
    assert procfs.rss_bytes([proc.pid]) == 0
    assert procfs.memory_bytes([proc.pid]) == (0, 0)


def test_stat_fields_survive_a_command_name_with_spaces_and_parentheses(tmp_path):
    odd = tmp_path / "a) b (c"  # the kernel names the process after the path it executed
    odd.symlink_to(sys.executable)
    proc = _child("pass", executable=str(odd))
    try:
        fields = procfs.stat_fields(proc.pid)
        assert fields[0] in "RS"  # running or sleeping in its read of stdin
        assert int(fields[1]) == os.getpid()  # the parent pid
        assert procfs.tree_pids(os.getpid()).count(proc.pid) == 1
    finally:
        _finish(proc)


def test_smaps_rollup_of_this_process_parses():
    fields = procfs.smaps_rollup(os.getpid())
    assert 0 < fields["Pss"] <= fields["Rss"]
    assert all(isinstance(v, int) and v >= 0 for v in fields.values())
    assert procfs.pss_bytes([os.getpid()]) > 0
    pss, rss = procfs.memory_bytes([os.getpid()])
    assert pss is not None and pss > 0 and rss > 0


def test_memory_of_a_child_counts_the_pages_it_touched():
    proc = _child(f"b = b'x' * {96 * MIB}")
    try:
        assert procfs.pss_bytes([proc.pid]) >= 96 * MIB
        assert procfs.rss_bytes([proc.pid]) >= 96 * MIB
        pss, rss = procfs.memory_bytes(procfs.tree_pids(os.getpid()))
        assert pss is not None and pss >= 96 * MIB and rss >= 96 * MIB
    finally:
        _finish(proc)


def test_cpu_seconds_of_a_child_count_the_cpu_it_used():
    proc = _child("import time\nwhile time.process_time() < 0.3: pass")
    try:
        # /proc counts in clock ticks (1/SC_CLK_TCK s): allow one.
        assert procfs.cpu_seconds([proc.pid]) >= 0.3 - 1.0 / procfs.TICKS
        assert procfs.cpu_seconds(procfs.tree_pids(os.getpid())) >= procfs.cpu_seconds([proc.pid])
        assert procfs.process_cpu_seconds(proc.pid, proc.pid) is not None  # the main thread's own stat
    finally:
        _finish(proc)


def test_cpu_clock_keeps_the_reading_of_a_child_that_exited():
    clock = procfs.CpuClock()
    proc = _child("import time\nwhile time.process_time() < 0.2: pass")
    with_child = clock.sample()
    assert clock.seen[proc.pid] >= 0.2 - 1.0 / procfs.TICKS
    _finish(proc)
    assert clock.sample() >= with_child


def test_meminfo_reads_total_and_available():
    m = procfs.meminfo()
    assert m["MemTotal"] > 0
    assert 0 < m["MemAvailable"] <= m["MemTotal"]


def test_results_write_both_files_and_leave_no_temporary(tmp_path):
    data = {"meta": {"date": "2026-01-01"}, "rows": [1, 2.5]}
    js, md = results.write("thing", data, "# table", out_dir=tmp_path / "new")
    assert (js.name, md.name) == ("thing.json", "thing.md")
    assert json.loads(js.read_text()) == data and js.read_text().endswith("\n")
    assert md.read_text() == "# table\n"
    results.write("thing", {"v": 2}, "second\n", out_dir=tmp_path / "new")  # replaces
    assert results.load("thing", out_dir=tmp_path / "new") == {"v": 2}
    assert md.read_text() == "second\n"
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == ["thing.json", "thing.md"]


def test_results_quick_runs_get_their_own_names(tmp_path):
    results.write("thing", {"quick": True}, "q", out_dir=tmp_path, quick=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thing-quick.json", "thing-quick.md"]
    assert results.load("thing", quick=False, out_dir=tmp_path) is None
    assert results.load("thing", quick=True, out_dir=tmp_path) == {"quick": True}


def test_results_write_failure_keeps_the_old_file(tmp_path):
    results.write("thing", {"v": 1}, "old", out_dir=tmp_path)
    with pytest.raises(TypeError):
        results.write("thing", {"v": object()}, "new", out_dir=tmp_path)
    assert results.load("thing", out_dir=tmp_path) == {"v": 1}
    assert (tmp_path / "thing.md").read_text() == "old\n"
    assert not list(tmp_path.glob("*.tmp"))


def test_bench_scripts_import_the_shared_helpers():
    # Each script imports bench.common by path; none keeps a copy of its own.
    for script in ["bench/e2e/image_bench.py", "bench/peers/run.py", "bench/peers/common.py",
                   "bench/gpu/train_bench.py", "bench/e2e/torch_peer.py"]:
        text = (ROOT / script).read_text()
        assert "from bench.common" in text, script
        assert "def tree_pids" not in text and "def pss_bytes" not in text, script


def test_status_sizes_hold_the_peak_and_the_split_of_rss():
    s = procfs.status_sizes(os.getpid())
    assert s["VmHWM"] >= s["VmRSS"] > 0
    assert s["RssAnon"] + s["RssFile"] <= s["VmRSS"]
    with pytest.raises(OSError):
        procfs.status_sizes(2**22 + 1)  # above pid_max's largest value: never a process


def test_reclaim_python_shm_removes_what_a_killed_tree_left_and_keeps_what_is_held():
    from multiprocessing import shared_memory
    before = procfs.shm_names()
    held = shared_memory.SharedMemory(create=True, size=1 << 16)  # created after `before`, still mapped here
    try:
        # A child and its resource tracker killed together (as the peer
        # runner kills a peer's session) leave their segment behind.
        code = ("from multiprocessing import shared_memory\n"
                "s = shared_memory.SharedMemory(create=True, size=1 << 20)\n"
                "print(s.name, flush=True)\nimport sys\nsys.stdin.read()")
        proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, start_new_session=True)
        name = proc.stdout.readline().strip()
        os.killpg(proc.pid, 9)
        proc.wait(timeout=60)
        assert name in procfs.shm_names()
        count, size = procfs.reclaim_python_shm(before)
        assert name not in procfs.shm_names()
        assert held.name in procfs.shm_names()
        assert count >= 1 and size >= 1 << 20
    finally:
        held.close()
        held.unlink()
