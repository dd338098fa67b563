"""python_workers=N (docs/python_ops.md, "Python ops in worker processes";
python/feedline/_procworker.py, python/bindings/python_workers.cc): the
Python middle of a Compose runs in worker processes fed through shared
memory. Same seed, same bytes as on the threads (python_workers=0), at 1
and 4 threads and after a resume; errors name sample, op and traceback;
skip-and-count; a worker that dies is a clear error naming its pid and
signal, never a hang; close() reaps the workers and closes the shared
memory."""
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch
import torchvision.transforms as T
from PIL import Image

import feedline
from feedline._procworker import PythonWorkerError

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


class Noise:
    """A random user member on a tensor: draws from torch's global generator."""

    def __call__(self, x):
        return (x + 0.05 * torch.rand(x.shape)).clamp(0, 1)


class Flaky:
    """Fails for about a quarter of the samples, by a draw from torch's generator."""

    def __call__(self, img):
        if torch.rand(1).item() < 0.25:
            raise RuntimeError("flaky member")
        return img


class FailsInWorkers:
    """Passes in the first call of a process (the probe at creation), then raises."""

    calls = 0

    def __call__(self, img):
        FailsInWorkers.calls += 1
        if FailsInWorkers.calls > 1:
            raise KeyError("no luck in a worker")
        return img


class Slow:
    """Holds each sample a while, so that a worker can be killed mid-epoch."""

    def __call__(self, img):
        time.sleep(0.05)
        return img


class Grow:
    """Returns a larger image than it gets: the output shared memory grows."""

    def __call__(self, img):
        return img.resize((img.width * 3, img.height * 3))


def random_compose():
    return T.Compose([T.RandomResizedCrop(48), T.RandomPerspective(0.3, p=1.0), T.ToTensor(), Noise(),
                      T.Normalize(MEAN, STD)])


def batches_bytes(loader):
    return [(x.numpy().tobytes(), y.numpy().tobytes()) for x, y in loader]


def memfds(prefix):
    """This process's open descriptors on the pool's memfds."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if prefix in target:
            out.append(target)
    return out


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too (not yet reaped by someone else's wait).
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_python_workers_give_the_same_bytes_as_threads_at_1_and_4_threads(dataset):
    kw = dict(batch_size=8, shuffle=True, seed=5)
    runs = {}
    for workers in (0, 2):
        for threads in (1, 4):
            with feedline.Loader(dataset, transform=random_compose(), num_threads=threads,
                                 python_workers=workers, **kw) as loader:
                assert loader.transform_source.chain.name == "python:RandomPerspective+ToTensor+Noise"
                runs[workers, threads] = [batches_bytes(loader) for _ in range(2)]  # two epochs
    assert runs[0, 1] == runs[0, 4] == runs[2, 1] == runs[2, 4]
    assert runs[0, 1][0] != runs[0, 1][1]  # another epoch draws other numbers


def test_resume_mid_epoch_in_workers_gives_the_threads_remaining_batches(dataset):
    kw = dict(batch_size=8, shuffle=True, seed=2)
    with feedline.Loader(dataset, transform=random_compose(), num_threads=3, **kw) as full:
        everything = batches_bytes(full)
    with feedline.Loader(dataset, transform=random_compose(), num_threads=3, python_workers=3, **kw) as first:
        it = iter(first)
        head = [tuple(t.numpy().tobytes() for t in next(it)) for _ in range(5)]
        state = first.state_dict()
    assert head == everything[:5]
    with feedline.Loader(dataset, transform=random_compose(), num_threads=1, python_workers=2, **kw) as resumed:
        resumed.load_state_dict(state)
        assert batches_bytes(resumed) == everything[5:]


def test_spawn_workers_give_the_same_bytes(dataset):
    kw = dict(batch_size=16, seed=3, num_threads=2)
    with feedline.Loader(dataset, transform=random_compose(), **kw) as threads:
        want = batches_bytes(threads)
    with feedline.Loader(dataset, transform=random_compose(), python_workers=2,
                         python_workers_start_method="spawn", **kw) as spawned:
        assert spawned.stats()["python_workers"]["start_method"] == "spawn"
        assert batches_bytes(spawned) == want


def test_a_member_that_cannot_be_pickled_is_refused_under_spawn_naming_the_start_method(dataset):
    compose = T.Compose([T.RandomResizedCrop(32), T.Lambda(lambda x: x), T.ToTensor()])
    with pytest.raises(RuntimeError, match="start method 'spawn'.*must pickle"):
        feedline.Loader(dataset, batch_size=8, transform=compose, python_workers=1,
                        python_workers_start_method="spawn")
    assert not multiprocessing.active_children()


def test_larger_outputs_grow_the_shared_memory(dataset):
    compose = T.Compose([T.RandomResizedCrop(32), Grow(), T.ToTensor()])
    with feedline.Loader(dataset, batch_size=8, transform=compose, num_threads=2) as threads:
        want = batches_bytes(threads)
    with feedline.Loader(dataset, batch_size=8, transform=compose, num_threads=2, python_workers=2) as procs:
        got = batches_bytes(procs)
    assert got == want and len(got[0][0]) == 8 * 3 * 96 * 96 * 4


def test_a_raising_member_in_a_worker_names_sample_op_and_traceback(dataset):
    compose = T.Compose([T.RandomResizedCrop(32), FailsInWorkers(), T.ToTensor()])
    with feedline.Loader(dataset, batch_size=8, transform=compose, num_threads=2, python_workers=1) as loader:
        with pytest.raises(feedline.Error) as e:
            list(loader)
    msg = str(e.value)
    assert "python:FailsInWorkers raised KeyError: 'no luck in a worker'" in msg, msg
    assert "Traceback (most recent call last)" in msg and "test_python_workers.py" in msg
    assert "key '" in msg or "file '" in msg, msg  # the sample
    if sys.version_info >= (3, 11):
        assert "in transform member" in msg and "at position 1" in msg


def test_raising_samples_in_workers_are_skipped_and_counted_as_on_threads(dataset):
    compose = T.Compose([T.RandomResizedCrop(32), Flaky(), T.ToTensor()])
    results = {}
    for workers in (0, 3):
        with feedline.Loader(dataset, batch_size=8, transform=compose, num_threads=4, max_errors=90,
                             python_workers=workers) as loader:
            got = batches_bytes(loader)
            errors = loader.stats()["errors"]
        assert 0 < errors["skipped"] < 96
        assert errors["by_reason"] == {"python:Flaky/Unknown": errors["skipped"]}
        assert all("RuntimeError: flaky member" in line and "Traceback" in line for line in errors["log"])
        results[workers] = got, errors["total"], errors["skipped"]
    assert results[0] == results[3]


def test_stats_say_the_python_ops_ran_in_processes(dataset):
    with feedline.Loader(dataset, batch_size=8, transform=random_compose(), num_threads=2,
                         python_workers=2) as loader:
        for _ in loader:
            pass
        s = loader.stats()
    op = next(o for o in s["ops"] if o.get("python"))
    assert op["processes"] == 2 and "gil_held_s" not in op
    assert op["proc_calls"] >= 96 and op["proc_run_s"] > 0 and op["proc_call_s"] >= op["proc_run_s"]
    assert s["python_workers"]["processes"] == 2 and len(s["python_workers"]["pids"]) == 2


def test_close_reaps_the_workers_and_closes_the_shared_memory(dataset):
    loader = feedline.Loader(dataset, batch_size=8, transform=random_compose(), num_threads=2, python_workers=3)
    pool = loader._python_pool
    prefix, pids = pool.prefix, pool.pids
    assert len(pids) == 3 and all(alive(p) for p in pids)
    assert len(memfds(prefix)) == 6  # each worker's input and output, owned by the C++ pool
    next(iter(loader))
    loader.close()
    # Every worker exited at EOF on its socket (status 0), none had to be killed.
    assert pool.exitcodes == [0, 0, 0]
    assert not any(alive(p) for p in pids)
    assert not memfds(prefix)
    assert not [c for c in multiprocessing.active_children() if c.pid in pids]


def _holds(pid, prefix):
    """Descriptors of process `pid` on memfds named with `prefix`."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if prefix in os.readlink(f"/proc/{pid}/fd/{fd}"):
                out.append(fd)
        except OSError:
            pass
    return out


def test_two_loaders_with_workers_close_independently(dataset):
    """A worker forked for the second loader must not hold the first one's
    sockets or memfds: the first one's workers then still exit at EOF when
    it closes (not killed after the grace), and nothing keeps its shared
    memory."""
    a = feedline.Loader(dataset, batch_size=8, transform=random_compose(), num_threads=2, python_workers=2)
    b = feedline.Loader(dataset, batch_size=8, transform=random_compose(), num_threads=2, python_workers=2)
    try:
        pa, pb = a._python_pool, b._python_pool
        for pid in pb.pids:
            assert not _holds(pid, pa.prefix), pid
        next(iter(a))
        next(iter(b))
        a.close()
        assert pa.exitcodes == [0, 0]
        assert all(alive(p) for p in pb.pids)
        x, _ = next(iter(b))  # the second loader goes on
        assert x.shape[0] == 8
    finally:
        a.close()
        b.close()
    assert pb.exitcodes == [0, 0]


def test_refused_where_nothing_would_run_in_the_workers(dataset):
    with pytest.raises(ValueError, match="no Python members"):
        feedline.Loader(dataset, batch_size=8, python_workers=2)
    with pytest.raises(ValueError, match="map= .*not supported with python_workers"):
        feedline.Loader(dataset, batch_size=8, transform=random_compose(), python_workers=2, map=lambda s: s)
    with pytest.raises(ValueError, match="python_workers must be"):
        feedline.Loader(dataset, batch_size=8, transform=random_compose(), python_workers=-1)
    assert not multiprocessing.active_children()


@pytest.mark.parametrize("how", ["kill", "exit"])
def test_a_worker_that_dies_is_an_error_naming_its_pid_and_status_never_a_hang(dataset, how):
    compose = T.Compose([T.RandomResizedCrop(32), Slow(), T.ToTensor()])
    # Under skip-and-count too: a dead worker is not a sample to skip.
    with feedline.Loader(dataset, batch_size=4, transform=compose, num_threads=2, python_workers=2,
                         max_errors=50, prefetch_batches=1) as loader:
        victim = loader._python_pool.pids[0]
        it = iter(loader)
        next(it)
        if how == "kill":
            os.kill(victim, signal.SIGKILL)
        else:  # the worker ends itself, as os._exit in a member would
            os.kill(victim, signal.SIGTERM)
        # A hang guard only: SIGALRM interrupts a blocked next() (it polls for signals).
        def hung(*_):
            raise AssertionError("no error 120 s after a worker died")
        previous = signal.signal(signal.SIGALRM, hung)
        signal.alarm(120)
        try:
            with pytest.raises(PythonWorkerError) as e:
                for _ in it:
                    pass
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
    msg = str(e.value)
    assert f"worker process {victim} died" in msg, msg
    assert "signal 9" in msg if how == "kill" else "signal 15" in msg, msg
    assert not alive(victim)


@pytest.mark.parametrize("crash, status", [("os._exit(7)", "exited with status 7"),
                                           ("ctypes.string_at(0)", "killed by signal 11")])
def test_a_member_that_crashes_its_worker_is_reported_and_the_loop_does_not_hang(dataset, tmp_path, crash,
                                                                                   status):
    # os._exit or a segfault inside a member, in a child interpreter with a hard bound.
    script = tmp_path / "crash.py"
    script.write_text(textwrap.dedent(f"""
        import ctypes, os, sys
        import torchvision.transforms as T
        import feedline

        class Crash:
            calls = 0
            def __call__(self, img):
                Crash.calls += 1
                if Crash.calls > 2:
                    {crash}
                return img

        compose = T.Compose([T.RandomResizedCrop(32), Crash(), T.ToTensor()])
        with feedline.Loader({str(dataset)!r}, batch_size=8, transform=compose, python_workers=1,
                             num_threads=2) as loader:
            try:
                for _ in loader:
                    pass
            except feedline._procworker.PythonWorkerError as e:
                print("ERROR", e)
                sys.exit(0)
        print("NO ERROR")
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert "ERROR Python-op worker process" in out.stdout and status in out.stdout, out.stdout


def test_pixels_in_workers_are_what_the_member_gets_on_threads(dataset):
    class Record:
        def __call__(self, img):
            assert isinstance(img, Image.Image)
            return img

    compose = T.Compose([T.Resize(40), T.CenterCrop(32), Record(), T.PILToTensor()])
    with feedline.Loader(dataset, batch_size=8, transform=compose, num_threads=2) as a:
        want = batches_bytes(a)
    with feedline.Loader(dataset, batch_size=8, transform=compose, num_threads=2, python_workers=2) as b:
        got = batches_bytes(b)
    assert got == want


def test_the_doctor_sees_python_workers_in_the_settings(dataset):
    from feedline.doctor.feedline_loader import FeedlineProbe
    with feedline.Loader(dataset, batch_size=8, transform=random_compose(), num_threads=2,
                         python_workers=2) as loader:
        assert FeedlineProbe(loader).settings()["python_workers"] == 2


class Hangs:
    """Passes the probe, then never returns (a member stuck in a worker)."""

    calls = 0

    def __call__(self, img):
        Hangs.calls += 1
        if Hangs.calls > 1:
            time.sleep(3600)
        return img


def test_a_member_that_hangs_in_a_worker_hits_the_timeout_and_close_kills_it(dataset):
    compose = T.Compose([T.RandomResizedCrop(32), Hangs(), T.ToTensor()])

    def hung(*_):
        raise AssertionError("no timeout error 120 s into a hung worker")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(120)
    try:
        loader = feedline.Loader(dataset, batch_size=4, transform=compose, num_threads=1, python_workers=1,
                                 timeout=1.0)
        pool = loader._python_pool
        with pytest.raises(feedline.Error, match="python:Hangs.*stall_timeout_ms=1000"):
            list(loader)
        loader.close()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert pool.exitcodes == [-signal.SIGKILL]  # it could not exit at EOF: killed after the grace
    assert not memfds(pool.prefix)
