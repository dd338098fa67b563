"""feedline.doctor: how starved is a training loop, why, and what to change.

    import feedline
    doctor = feedline.doctor.Doctor(step_fn=step)       # step_fn: optional
    for epoch in range(epochs):
        for batch in doctor.watch(loader):               # a torch DataLoader, a feedline Loader, any iterable
            step(batch)
    doctor.measure_capacity(loader, batches=20)          # optional: the loader alone, the step alone
    report = doctor.report(html="doctor.html", json="doctor.json", trace="doctor.trace.json")

Or, without keeping the Doctor, the module-level pair:

    w = feedline.doctor.watch(loader)                    # a fresh Doctor
    for batch in w:
        step(batch)
    feedline.doctor.report(html="doctor.html")           # the most recent watch(); restores the loader

The diagnosis rules and the model behind every prediction live in
feedline.doctor.rules, shared by this API and the CLI
(`python3 -m feedline.doctor DATA`). Design note: docs/doctor.md.
"""
import sys
import threading

from . import rules
from . import watch as _watch_module
from ._report import SCHEMA, SCHEMA_VERSION, Report, validate
from .trace import validate_trace
from .watch import Doctor, Watched

__all__ = ["Doctor", "Watched", "watch", "report", "Report", "rules", "validate", "validate_trace", "SCHEMA",
           "SCHEMA_VERSION"]

# The Watched that the most recent module-level watch() returned (in this
# process), which module-level report() diagnoses.
_last_lock = threading.Lock()
_last = None


def watch(iterable, step_fn=None, **kwargs):
    """A new Doctor watching `iterable` (kwargs go to Doctor): iterate the
    result as the loader, then call report() (this module's, or the
    result's). Returns the Watched; `.doctor` is its Doctor."""
    global _last
    w = _watch_module.watch(iterable, step_fn=step_fn, **kwargs)
    with _last_lock:
        _last = w
    return w


def report(file=sys.stdout, json=None, html=None, trace=None):
    """Diagnoses the loop that the most recent module-level watch() measured,
    like Doctor.report (prints the summary to `file`, None: nothing; writes
    the JSON, HTML and trace files asked for; returns the Report), then
    restores its loader. Raises RuntimeError when watch() was never called."""
    with _last_lock:
        w = _last
    if w is None:
        raise RuntimeError("feedline.doctor.report(): nothing to report on; call feedline.doctor.watch(loader), "
                           "iterate what it returns, then report() (or keep a Doctor and call its report())")
    return w.report(file=file, json=json, html=html, trace=trace)
