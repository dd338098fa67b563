"""The doctor inside a framework's loop (docs/integrations.md, "The doctor
inside a framework"): Doctor.hooks() driven as a framework's callbacks
drive it measures what watch() measures; a Watched loader stands in for the
loader (position, state, epochs); the report names the framework's loop
and the user's step; installed frameworks' frames are library frames, a
user's examples/lightning/ is not."""
import io
import time

import feedline
from feedline.doctor import Doctor
from feedline.doctor.evidence import LoopSite
from feedline.doctor.step_profile import _is_library


def _loader(dataset, **kw):
    return feedline.Loader(dataset, batch_size=8, shuffle=True, seed=3, num_threads=1,
                           transform=feedline.transforms.imagenet_eval(32, resize=40), **kw)


def test_hooks_as_a_framework_calls_them_count_every_step_and_sample(dataset):
    loader = _loader(dataset)
    doctor = Doctor(what_if=False)
    site = LoopSite(framework="Lightning", version="2.6.6", loop="Trainer.fit", step="Net.training_step",
                    file="train.py", line=33)
    hooks = doctor.hooks(loader, site)
    steps = 0
    for _ in range(2):
        hooks.epoch_start()
        for batch in loader:  # the framework's own iteration
            hooks.batch_start(batch)
            time.sleep(0.001)  # the step
            hooks.batch_end()
            steps += 1
        hooks.epoch_end()
    ev = doctor.evidence()
    assert ev["loader"]["kind"] == "feedline"
    assert ev["loop"]["steps"] == steps == 2 * len(loader)
    assert ev["loop"]["samples"] == 2 * 96
    assert ev["loop"]["epochs"] == 2
    assert ev["loop"]["site"] == site.to_json()
    out = io.StringIO()
    doctor.report(file=out)
    assert "in        Lightning 2.6.6 Trainer.fit, step Net.training_step (train.py:33)" in out.getvalue()


def test_hooks_with_a_step_end_reported_late_count_the_time_as_the_step(dataset):
    """batch_end(at=t): the Trainer's on_log/on_save after a step are the
    step's time, not the next wait."""
    loader = _loader(dataset)
    doctor = Doctor(what_if=False)
    hooks = doctor.hooks(loader)
    hooks.epoch_start()
    it = iter(loader)
    hooks.batch_start(next(it), samples=8)
    t_end = time.perf_counter()
    time.sleep(0.05)  # after the step, before the hook: saving a checkpoint
    hooks.batch_end(at=time.perf_counter())
    hooks.batch_start(next(it), samples=8)
    hooks.batch_end()
    hooks.epoch_end()
    del it
    first, second = doctor.steps
    assert first.step_s >= 0.05 and first.t_request + first.wait_s + first.step_s >= t_end
    # The next wait starts where the late step ended, not at the step's last hook before it.
    assert second.t_request >= first.t_request + first.wait_s + first.step_s


def test_a_watched_loader_stands_in_for_the_loader(dataset):
    loader = _loader(dataset)
    w = Doctor(what_if=False).watch(loader)
    assert len(w) == len(loader) and w.batch_size == 8
    it = iter(w)
    next(it), next(it)
    assert w.position == loader.position == (0, 2)
    state = w.state_dict()
    del it
    w.set_epoch(3)
    assert loader.position == (3, 0)
    w.load_state_dict(state)
    assert loader.position == (0, 2)
    w.close()


def test_installed_frameworks_are_library_frames_and_a_users_folder_of_that_name_is_not():
    assert _is_library("/venv/lib/python3.11/site-packages/lightning/pytorch/loops/fit_loop.py")
    assert _is_library("/venv/lib/python3.11/site-packages/transformers/trainer.py")
    assert _is_library("/usr/lib/python3/dist-packages/accelerate/accelerator.py")
    assert _is_library("/venv/lib/python3.11/site-packages/ray/experimental/tqdm_ray.py")  # wraps print
    assert _is_library("ray/experimental/tqdm_ray.py")  # as the profiler names it: relative to sys.path
    assert not _is_library("/work/project/examples/lightning/train.py")
    assert not _is_library("examples/lightning/train.py")
    assert not _is_library("/home/me/transformers/my_trainer.py")
