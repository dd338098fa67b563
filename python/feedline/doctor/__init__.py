"""feedline.doctor: how starved is a training loop, why, and what to change.

    import feedline
    doctor = feedline.doctor.Doctor(step_fn=step)       # step_fn: optional
    for epoch in range(epochs):
        for batch in doctor.watch(loader):               # a torch DataLoader, a feedline Loader, any iterable
            step(batch)
    doctor.measure_capacity(loader, batches=20)          # optional: the loader alone, the step alone
    report = doctor.report(html="doctor.html", json="doctor.json", trace="doctor.trace.json")

The diagnosis rules and the model behind every prediction live in
feedline.doctor.rules, shared by this API and the CLI
(`python3 -m feedline.doctor DATA`). Design note: docs/doctor.md.
"""
from . import rules
from .report import SCHEMA, SCHEMA_VERSION, Report, validate
from .trace import validate_trace
from .watch import Doctor, Watched, watch

__all__ = ["Doctor", "Watched", "watch", "Report", "rules", "validate", "validate_trace", "SCHEMA",
           "SCHEMA_VERSION"]
