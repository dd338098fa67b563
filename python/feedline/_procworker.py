"""python_workers=N (docs/python_ops.md, "Python ops in worker processes"):
the Python middle of a split Compose runs in N worker processes instead of
under the GIL on feedline's threads.

Each worker owns a socket and two shared-memory files (memfd: no name in
/dev/shm, gone with the last descriptor). For a sample, the C++ op
(python/bindings/python_workers.cc) copies the prefix's uint8 pixels into
the input file, sends a fixed-size request (h, w, c, bytes, the sample's
seed), and the worker runs the middle, exactly the object the thread path
calls (`_pyops.ChainRunner`, which seeds torch's CPU generator, `random` and
numpy's global generator from that seed), writes the output array into its
output file and replies with its dtype, shape and size, or with the
exception and its traceback. Pixels are never pickled.

`ProcessPool` is the parent's side (start, hand the descriptors to C++,
close); `_serve` is the worker's loop.
"""
from __future__ import annotations

import mmap
import multiprocessing
import os
import secrets
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from . import _C

# The wire format (python_workers.cc): little-endian, fixed size.
_REQUEST = struct.Struct("<IIIIQQ")        # op (1 = run), h, w, c, nbytes, seed
_REPLY = struct.Struct("<IIII16s8qQQQ")    # status, is_pil, ndim, pad, dtype, shape[8], nbytes, text_len, run_ns
_MAX_DIMS = 8
_READY = b"R"
START_METHODS = ("fork", "spawn", "forkserver")


class PythonWorkerError(RuntimeError):
    """A Python-op worker process died (killed, crashed, exited): the loader
    cannot go on. The message names the worker's pid and exit status."""


def _recv_exact(sock: socket.socket, n: int) -> Optional[bytes]:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _error_text(e: BaseException) -> bytes:
    # As the thread path words it (python_op.cc PythonError): "<Type>: <value>\n<traceback>".
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip("\n")
    try:
        value = str(e)
    except Exception:
        value = "<unprintable>"
    return f"{type(e).__name__}: {value}\n{tb}".encode("utf-8", "backslashreplace")


def _serve(sock: socket.socket, run: Callable[[np.ndarray, int], Tuple[np.ndarray, bool, str]],
           inherited: List[int]) -> None:
    """The worker's loop: receive the two memfds, say ready, then serve
    requests until the parent closes the socket."""
    # Ctrl-C goes to the whole process group: the parent handles it and
    # closes the workers; a worker dying of it mid-call would be reported
    # as a crash instead.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for fd in inherited:  # fork: other workers' descriptors, so that their EOFs arrive
        if fd == sock.fileno():
            continue
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        import torch
        torch.set_num_threads(1)  # as torch's DataLoader workers: N processes, one thread each
    except ImportError:
        pass
    _, fds, _, _ = socket.recv_fds(sock, 1, 2)
    in_fd, out_fd = fds
    sock.sendall(_READY + struct.pack("<I", os.getpid()))
    in_map: Optional[mmap.mmap] = None
    out_map: Optional[mmap.mmap] = None
    in_len = out_len = 0
    while True:
        req = _recv_exact(sock, _REQUEST.size)
        if req is None:
            return
        op, h, w, c, nbytes, seed = _REQUEST.unpack(req)
        if op != 1:
            return
        if nbytes > in_len:
            if in_map is not None:
                in_map.close()
            in_len = os.fstat(in_fd).st_size
            in_map = mmap.mmap(in_fd, in_len, prot=mmap.PROT_READ)
        t0 = time.perf_counter_ns()
        try:
            pixels = np.frombuffer(in_map, np.uint8, nbytes).reshape(h, w, c) if nbytes and in_map is not None \
                else np.zeros((h, w, c), np.uint8)
            array, pil, dtype = run(pixels, seed)
            del pixels  # an export of in_map would keep it from being remapped
            array = np.ascontiguousarray(array)
            if array.ndim > _MAX_DIMS:
                raise ValueError(f"the Python members returned an array of {array.ndim} dimensions "
                                 f"(at most {_MAX_DIMS})")
            n = array.nbytes
            if n > out_len or out_map is None:
                size = max(4096, out_len)
                while size < n:
                    size *= 2
                if out_map is not None:
                    out_map.close()
                os.ftruncate(out_fd, size)
                out_map, out_len = mmap.mmap(out_fd, size), size
            if n:
                np.frombuffer(out_map, np.uint8, n)[:] = array.reshape(-1).view(np.uint8)
            shape = list(array.shape) + [0] * (_MAX_DIMS - array.ndim)
            sock.sendall(_REPLY.pack(0, int(bool(pil)), array.ndim, 0, dtype.encode()[:16], *shape, n, 0,
                                     time.perf_counter_ns() - t0))
        except Exception as e:
            text = _error_text(e)
            sock.sendall(_REPLY.pack(1, 0, 0, 0, b"", *([0] * _MAX_DIMS), 0, len(text),
                                     time.perf_counter_ns() - t0) + text)


# The parent's descriptors of every live pool (sockets and memfds), by pool:
# a worker forked for one loader closes them all, or it would keep another
# loader's workers from seeing EOF (and that loader's memfds mapped) after
# that loader closes.
_POOL_FDS: Dict[int, List[int]] = {}
_POOL_FDS_LOCK = threading.Lock()


def default_start_method() -> str:
    # torch's DataLoader: fork where the platform has it.
    return "fork" if sys.platform.startswith("linux") else "spawn"


class ProcessPool:
    """N worker processes serving `run` (a picklable callable under "spawn"
    and "forkserver"), started now; `cpp` is the C++ pool the recipe's op
    calls. close() stops and reaps them and closes every descriptor."""

    def __init__(self, run: Callable[[np.ndarray, int], Any], num_workers: int,
                 start_method: Optional[str] = None, start_timeout: float = 120.0) -> None:
        method = start_method or default_start_method()
        if method not in START_METHODS:
            raise ValueError(f"python_workers_start_method must be one of {START_METHODS}, got {method!r}")
        ctx: Any = multiprocessing.get_context(method)
        # Per loader: the memfds' names (/proc/<pid>/fd shows them).
        self.prefix = f"feedline-pyop-{os.getpid()}-{secrets.token_hex(4)}"
        self.start_method = method
        self.processes: List[Any] = []
        self._pids: List[int] = []
        self.cpp: Optional[_C.WorkerPool] = None
        self._socks: List[socket.socket] = []
        self._fds: List[int] = []
        self._closed = False
        self.exitcodes: List[Optional[int]] = []  # after close(): 0 for a worker that exited at EOF
        try:
            for i in range(num_workers):
                parent, child = socket.socketpair()
                self._socks.append(parent)
                in_fd = os.memfd_create(f"{self.prefix}-w{i}-in", os.MFD_CLOEXEC)
                self._fds.append(in_fd)
                out_fd = os.memfd_create(f"{self.prefix}-w{i}-out", os.MFD_CLOEXEC)
                self._fds.append(out_fd)
                # fork: the parent's ends (its own too: while the child holds
                # a copy, it would never see EOF) and the other memfds.
                with _POOL_FDS_LOCK:
                    _POOL_FDS[id(self)] = [s.fileno() for s in self._socks] + self._fds
                    inherited = [fd for fds in _POOL_FDS.values() for fd in fds] if method == "fork" else []
                p = ctx.Process(target=_serve, args=(child, run, inherited), name=f"{self.prefix}-w{i}", daemon=True)
                try:
                    p.start()
                except Exception as e:
                    raise RuntimeError(
                        f"python_workers: could not start worker {i} with start method {method!r}: "
                        f"{type(e).__name__}: {e} (under 'spawn' and 'forkserver' the transform's members "
                        "must pickle: no lambdas or local classes)") from e
                finally:
                    child.close()
                self.processes.append(p)
                self._pids.append(p.pid)
                socket.send_fds(parent, [b"F"], [in_fd, out_fd])
            deadline = time.monotonic() + start_timeout
            for p, s in zip(self.processes, self._socks):
                s.settimeout(max(0.1, deadline - time.monotonic()))
                try:
                    ready = _recv_exact(s, 1 + 4)
                except socket.timeout:
                    ready = None
                if ready is None or ready[:1] != _READY:
                    p.join(1.0)
                    raise PythonWorkerError(
                        f"python_workers: worker process {p.pid} did not start ({_exit_text(p)}); "
                        "see its output above")
                s.settimeout(None)
            workers = []
            for p, s, i in zip(self.processes, self._socks, range(num_workers)):
                # The C++ pool owns these descriptors from here on.
                workers.append((p.pid, s.detach(), self._fds[2 * i], self._fds[2 * i + 1]))
            self._socks, self._fds = [], []
            self.cpp = _C.WorkerPool(workers)
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> List[int]:
        return list(self._pids)

    def dead(self) -> Optional[str]:
        """Why the pool cannot go on (a worker died), or None."""
        return None if self.cpp is None else self.cpp.broken

    def cancel(self) -> None:
        """Wakes every call waiting for a worker (the loader is closing)."""
        if self.cpp is not None:
            self.cpp.shutdown()

    def close(self) -> None:
        """Closes the workers' sockets (they exit at EOF), reaps them, kills
        any that does not exit within a few seconds (a member that hangs),
        and closes every descriptor. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with _POOL_FDS_LOCK:  # before the numbers are closed and reused
            _POOL_FDS.pop(id(self), None)
        self.cancel()
        cpp, self.cpp = self.cpp, None
        if cpp is not None:
            cpp.close()  # the sockets (the workers exit at EOF) and the memfds
        for s in self._socks:
            s.close()
        for fd in self._fds:
            os.close(fd)
        self._socks, self._fds = [], []
        deadline = time.monotonic() + 5.0
        for p in self.processes:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self.processes:
            if p.is_alive():
                p.kill()
                p.join(5.0)
            self.exitcodes.append(p.exitcode)
            if p.exitcode is not None:
                p.close()


def _exit_text(p: Any) -> str:
    code = p.exitcode
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
