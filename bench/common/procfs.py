"""A process tree's CPU time and memory, from Linux's /proc.

Every reader tolerates processes that exit while it reads (a worker that
ends between listing and reading is left out of that reading): the
benchmarks sample trees of live, changing processes. Sizes are in bytes,
times in seconds.
"""
from __future__ import annotations

import os
from typing import Dict, Iterable, List, Optional, Tuple

TICKS = os.sysconf("SC_CLK_TCK")

# utime and stime in /proc/PID/stat, counted from the field after the
# command name (field 3, the state, is index 0): fields 14 and 15 of proc(5).
_UTIME, _STIME, _PPID = 11, 12, 1


def stat_fields(pid: int, tid: Optional[int] = None) -> List[str]:
    """The fields of /proc/PID/stat (or of one thread's,
    /proc/PID/task/TID/stat) after the command name, which may hold spaces
    and parentheses: index 0 is the state (field 3 of proc(5))."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    with open(path) as f:
        return f.read().rsplit(")", 1)[1].split()


def _children_by_scan() -> Dict[int, List[int]]:
    children: Dict[int, List[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            ppid = int(stat_fields(int(name))[_PPID])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
    return children


def _has_children_files(pid: int) -> bool:
    # /proc/PID/task/TID/children needs CONFIG_PROC_CHILDREN; without it
    # (some container kernels) the tree comes from a scan of /proc.
    return os.path.exists(f"/proc/{pid}/task/{pid}/children") or not os.path.exists(f"/proc/{pid}")


def tree_pids(root: int) -> List[int]:
    """root and every process below it (root first). A root that has
    exited still heads the list: its readings come back empty."""
    pids: List[int] = []
    todo = [root]
    if not _has_children_files(root):
        children = _children_by_scan()
        while todo:
            pid = todo.pop()
            pids.append(pid)
            todo.extend(children.get(pid, []))
        return pids
    while todo:
        pid = todo.pop()
        pids.append(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (FileNotFoundError, ProcessLookupError):
            pass
    return pids


def process_cpu_seconds(pid: int, tid: Optional[int] = None) -> Optional[float]:
    """utime + stime of a process (all its threads), or of one of its
    threads; None when it is gone."""
    try:
        f = stat_fields(pid, tid)
        return (int(f[_UTIME]) + int(f[_STIME])) / TICKS
    except (OSError, IndexError, ValueError):
        return None


def cpu_seconds(pids: Iterable[int]) -> float:
    """utime + stime summed over the processes (all their threads); those
    gone count 0."""
    return sum(process_cpu_seconds(pid) or 0.0 for pid in pids)


def _kib_fields(path: str) -> Dict[str, int]:
    """'Key:   123 kB' lines as {key: bytes}; lines without a kB unit are
    left out."""
    out: Dict[str, int] = {}
    with open(path) as f:
        for line in f:
            key, sep, rest = line.partition(":")
            parts = rest.split()
            if sep and len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
                out[key.strip()] = int(parts[0]) * 1024
    return out


def status_sizes(pid: int) -> Dict[str, int]:
    """The sizes in /proc/PID/status as {field: bytes} (VmRSS, VmHWM, the
    peak, RssAnon, RssFile, ...). Raises OSError where the process is gone."""
    return _kib_fields(f"/proc/{pid}/status")


def smaps_rollup(pid: int) -> Dict[str, int]:
    """/proc/PID/smaps_rollup as {field: bytes} (Rss, Pss, Shared_Clean,
    ...). Raises OSError where the process is gone or the kernel (< 4.14) or
    permissions do not provide it."""
    return _kib_fields(f"/proc/{pid}/smaps_rollup")


def pss_bytes(pids: Iterable[int]) -> int:
    """Proportional set size summed over the processes: a page shared by
    forked workers counts once in the sum. Processes gone or unreadable
    count 0."""
    total = 0
    for pid in pids:
        try:
            total += smaps_rollup(pid).get("Pss", 0)
        except OSError:
            pass
    return total


def rss_bytes(pids: Iterable[int]) -> int:
    """Resident set size (VmRSS of /proc/PID/status) summed over the
    processes; those gone count 0. Shared pages count once per process."""
    total = 0
    for pid in pids:
        try:
            total += _kib_fields(f"/proc/{pid}/status").get("VmRSS", 0)
        except OSError:
            pass
    return total


def memory_bytes(pids: Iterable[int]) -> Tuple[Optional[int], int]:
    """(PSS, RSS) summed over the processes. PSS is None when the
    smaps_rollup of a live process cannot be read (an old kernel, or
    permissions): a sum missing a process would understate the tree."""
    pss: Optional[int] = 0
    rss = 0
    for pid in pids:
        try:
            rss += _kib_fields(f"/proc/{pid}/status").get("VmRSS", 0)
        except OSError:
            continue  # gone
        if pss is not None:
            try:
                pss += smaps_rollup(pid).get("Pss", 0)
            except OSError:
                pss = None
    return pss, rss


def meminfo() -> Dict[str, int]:
    """/proc/meminfo as {field: bytes} (MemTotal, MemAvailable, ...)."""
    return _kib_fields("/proc/meminfo")


class CpuClock:
    """CPU seconds (utime + stime) of a process and every process below it.
    Each process's last reading is kept, so a worker that exits (or is
    replaced) does not make the sum go backwards; sample() between batches
    keeps those readings fresh."""

    def __init__(self, root: Optional[int] = None) -> None:
        self.root = os.getpid() if root is None else root
        self.seen: Dict[int, float] = {}

    def sample(self) -> float:
        for pid in tree_pids(self.root):
            s = process_cpu_seconds(pid)
            if s is not None:
                self.seen[pid] = s
        return sum(self.seen.values())


SHM = "/dev/shm"
# What Python's multiprocessing leaves in /dev/shm when its process is
# killed before its teardown: shared_memory.SharedMemory segments and
# semaphores.
_PY_SHM_PREFIXES = ("psm_", "sem.mp-")


def shm_names() -> set:
    """The names in /dev/shm now (empty where there is none)."""
    try:
        return set(os.listdir(SHM))
    except OSError:
        return set()


def _shm_in_use() -> set:
    """/dev/shm names some live process has open or mapped (unreadable
    processes are skipped: this errs towards keeping a name)."""
    used = set()
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    i = line.find(SHM + "/")
                    if i >= 0:
                        used.add(line[i + len(SHM) + 1:].split(" ")[0].rstrip("\n"))
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith(SHM + "/"):
                    used.add(target[len(SHM) + 1:])
        except OSError:
            pass
    return used


def reclaim_python_shm(before: set) -> Tuple[int, int]:
    """Removes the multiprocessing segments and semaphores that appeared in
    /dev/shm since `before` (shm_names()) and that no live process holds:
    what a benchmark subprocess that was killed, or that left with
    os._exit, abandoned (tmpfs pages are RAM until unlinked). Returns
    (count, bytes) removed."""
    new = [n for n in shm_names() - before if n.startswith(_PY_SHM_PREFIXES)]
    if not new:
        return 0, 0
    used = _shm_in_use()
    count = size = 0
    for name in new:
        if name in used:
            continue
        path = os.path.join(SHM, name)
        try:
            size += os.stat(path).st_size
            os.unlink(path)
            count += 1
        except OSError:
            pass
    return count, size
