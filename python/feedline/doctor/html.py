"""A self-contained HTML report: inline CSS and SVG, no script, no external
resource, so it opens anywhere (also attached to a ticket or a CI artefact).

Plots: starvation over time (loop mode) or the scaling curve (pipeline
mode), time per stage, and capacity vs demand with each fix's prediction.
"""
from html import escape

from .rules import common as rc
from .summary import _ms, _rate, _settings_line, _source, step_line

_COLORS = {"worker": "#4e79a7", "main": "#e15759", "pin_thread": "#76b7b2", "engine": "#59a14f", "python": "#edc948",
           "loader": "#4e79a7", "step": "#e15759", "loop": "#9c755f", "fix": "#f28e2b"}
_W = 720


def _svg(id_, height, body, title):
    return (f'<svg id="{id_}" class="plot" xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{height}" '
            f'viewBox="0 0 {_W} {height}" role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>'
            f'{body}</svg>')


def bar_chart(id_, title, rows):
    """rows: (label, value, color, note). Horizontal bars, one per row."""
    rows = [r for r in rows if r[1] is not None]
    if not rows:
        return f'<p class="empty" id="{id_}">no data for {escape(title)}</p>'
    left, bar_h, gap = 210, 18, 8
    height = 30 + len(rows) * (bar_h + gap)
    vmax = max(r[1] for r in rows) or 1.0
    scale = (_W - left - 200) / vmax
    parts = [f'<text x="4" y="16" class="t">{escape(title)}</text>']
    for i, (label, value, color, note) in enumerate(rows):
        y = 26 + i * (bar_h + gap)
        w = max(1.0, value * scale)
        parts.append(f'<text x="{left - 6}" y="{y + 13}" text-anchor="end" class="l">{escape(label[:34])}</text>'
                     f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color}">'
                     f'<title>{escape(label)}: {escape(note)}</title></rect>'
                     f'<text x="{left + w + 6:.1f}" y="{y + 13}" class="v">{escape(note)}</text>')
    return _svg(id_, height, "".join(parts), title)


def line_chart(id_, title, xs, ys, x_label, y_label, y_max=None, marks=()):
    if len(xs) < 1:
        return f'<p class="empty" id="{id_}">no data for {escape(title)}</p>'
    left, right, top, bottom, height = 70, 16, 26, 36, 240
    x0, x1 = min(xs), max(xs)
    x1 = x1 if x1 > x0 else x0 + 1
    y_max = y_max or (max(ys) * 1.1 or 1.0)
    sx = lambda x: left + (x - x0) / (x1 - x0) * (_W - left - right)  # noqa: E731
    sy = lambda y: top + (1 - y / y_max) * (height - top - bottom)  # noqa: E731
    pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(xs, ys))
    area = f"{sx(xs[0]):.1f},{sy(0):.1f} {pts} {sx(xs[-1]):.1f},{sy(0):.1f}"
    parts = [f'<text x="4" y="16" class="t">{escape(title)}</text>']
    for frac in (0, 0.25, 0.5, 0.75, 1.0):
        y = sy(frac * y_max)
        parts.append(f'<line x1="{left}" x2="{_W - right}" y1="{y:.1f}" y2="{y:.1f}" class="g"/>'
                     f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="a">{_num(frac * y_max)}</text>')
    for x, label in marks:
        parts.append(f'<line x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{top}" y2="{height - bottom}" class="m"/>'
                     f'<text x="{sx(x) + 3:.1f}" y="{top + 10}" class="a">{escape(label)}</text>')
    parts.append(f'<polygon points="{area}" fill="#e1575933"/><polyline points="{pts}" fill="none" '
                 f'stroke="#e15759" stroke-width="1.8"/>')
    for x, y in zip(xs, ys) if len(xs) <= 40 else ():
        parts.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="#e15759">'
                     f'<title>{x:g}: {y:.3g}</title></circle>')
    parts.append(f'<text x="{(_W + left) / 2:.0f}" y="{height - 6}" text-anchor="middle" class="a">'
                 f'{escape(x_label)}</text>'
                 f'<text x="12" y="{(height) / 2:.0f}" class="a" transform="rotate(-90 12 {height / 2:.0f})" '
                 f'text-anchor="middle">{escape(y_label)}</text>'
                 f'<text x="{left}" y="{height - 20}" class="a">{_num(x0)}</text>'
                 f'<text x="{_W - right}" y="{height - 20}" text-anchor="end" class="a">{_num(x1)}</text>')
    return _svg(id_, height, "".join(parts), title)


def _num(v):
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def starvation_series(report, bins=60):
    """(bin centres in s, % of each bin spent waiting for data)."""
    rows = (report.get("timeline") or {}).get("rows") or []
    if not rows:
        return [], []
    end = max(r[0] + r[1] + r[2] for r in rows)
    start = min(r[0] for r in rows)
    width = max((end - start) / bins, 1e-6)
    wait = [0.0] * bins
    for s, w, _, _, _ in rows:
        # Spread each wait over the bins it covers.
        a, b = s - start, s - start + w
        i = int(a / width)
        while a < b and i < bins:
            edge = min(b, (i + 1) * width)
            wait[i] += edge - a
            a, i = edge, i + 1
    xs = [start + (i + 0.5) * width for i in range(bins)]
    return xs, [min(100.0, 100 * w / width) for w in wait]


def _epoch_marks(report):
    rows = (report.get("timeline") or {}).get("rows") or []
    marks, seen = [], set()
    for r in rows:
        if r[4] not in seen:
            seen.add(r[4])
            if r[4] > 0:
                marks.append((r[0], f"epoch {r[4]}"))
    return marks


def _capacity_rows(report):
    cap = report.get("capacity") or {}
    rows = []
    lc, sc = cap.get("loader_samples_per_s") or {}, cap.get("step_samples_per_s") or {}
    if lc.get("value"):
        rows.append((f"loader capacity ({lc['source']})", lc["value"], _COLORS["loader"],
                     f"{_rate(lc['value'])} samples/s"))
    if sc.get("value"):
        label = ("accelerator demand (target)" if sc["source"] == "target" else
                 f"step capacity ({_source(report, sc['source'])})")
        rows.append((label, sc["value"], _COLORS["step"], f"{_rate(sc['value'])} samples/s"))
    if cap.get("loop_samples_per_s"):
        rows.append((f"loop, measured ({rc.rate_window(report)})", cap["loop_samples_per_s"], _COLORS["loop"],
                     f"{_rate(cap['loop_samples_per_s'])} samples/s"))
    for f in report.get("findings", []):
        if f.get("predicted_samples_per_s") and (f.get("predicted_speedup") or 0) >= 1.01:
            rows.append((f"after fix {f['rank']}: {f['id']}", f["predicted_samples_per_s"], _COLORS["fix"],
                         f"{_rate(f['predicted_samples_per_s'])} samples/s ({f['predicted_speedup']:.2f}x)"))
    return rows


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:780px;color:#222}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 6px}
.kpi{display:flex;gap:12px;flex-wrap:wrap;margin:10px 0}.kpi div{background:#f4f4f6;border-radius:6px;padding:8px 12px}
.kpi b{display:block;font-size:18px}.starved{color:#c0392b}.fed{color:#2e7d32}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:4px 6px;text-align:left;
vertical-align:top}th{background:#f4f4f6}.sev-high{color:#c0392b;font-weight:bold}.sev-medium{color:#b9770e}
.plot text.t{font-weight:bold;font-size:13px}.plot text.l,.plot text.v{font-size:12px}
.plot text.a{font-size:11px;fill:#555}
.plot line.g{stroke:#e4e4e4}.plot line.m{stroke:#999;stroke-dasharray:3 3}.muted{color:#666;font-size:12px}
"""


def render(report):
    mode = report.get("mode")
    loop = report.get("loop") or {}
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
             f"<title>feedline doctor report</title><style>{_CSS}</style></head><body>",
             "<h1>feedline doctor</h1>",
             f'<p class="muted">{escape(_head_line(report))} · '
             f'{report["machine"]["cores"]} cores · schema {escape(str(report.get("schema")))} '
             f'v{report.get("schema_version")}</p>']
    if mode == "loop":
        # One window per figure, named under it (rules.common), as in the
        # terminal summary and the findings.
        starv = rc._starvation(report)
        cls = "starved" if starv >= rc.STARVED else "fed"
        parts.append('<div class="kpi">'
                     f'<div>waiting for data<b class="{cls}">{100 * starv:.0f}%</b>'
                     f'<span class="muted">{escape(rc.starvation_window(report))}</span></div>'
                     f'<div>throughput<b>{_rate(rc.current_rate(report))} samples/s</b>'
                     f'<span class="muted">{escape(rc.rate_window(report))}</span></div>'
                     f'<div>whole run<b>{_rate(loop.get("samples_per_s"))} samples/s</b>'
                     f'<span class="muted">{loop.get("steps", 0)} steps, '
                     f'{100 * loop.get("starvation", 0.0):.0f}% waiting, start-up included</span></div>'
                     f'<div>bound by<b>{escape(str((report.get("capacity") or {}).get("bound")))}</b></div></div>')
    if report.get("step"):
        parts.append(_step_section(report["step"]))
    parts.append(_findings_table(report))
    parts.append(_feedline_ops_table(report))
    tuner = ((report.get("feedline") or {}).get("tuner") or {})
    if tuner:
        from .summary import tuner_line
        parts.append('<h2>Autotuner</h2><p id="tuner">' + escape(tuner_line(report).split("; ")[0]) + "</p>")
        if tuner.get("log"):
            items = "".join(f"<li>{escape(entry)}</li>" for entry in tuner["log"])
            parts.append("<ol class=\"muted\">" + items + "</ol>")
    if mode == "trace":  # a trace has steps, not a loader or a loop: no plots of those
        parts.append('<p class="muted">Findings from a torch.profiler trace read offline (docs/doctor.md, '
                     '"Inside the step").</p></body></html>')
        return "".join(parts)
    parts.append("<h2>Plots</h2>")
    if mode == "loop":
        xs, ys = starvation_series(report)
        parts.append(line_chart("plot-starvation", "Starvation over time: % of each interval waiting for data",
                                xs, ys, "seconds since the first batch was asked for", "% waiting", 100.0,
                                _epoch_marks(report)))
    else:
        scan = report.get("scan") or []
        parts.append(line_chart("plot-scaling", "Scaling: samples/s by thread count",
                                [s["threads"] for s in scan], [s["samples_per_s"] for s in scan],
                                "threads", "samples/s"))
    stage_rows = [(s["name"], s["per_batch_s"] * 1e3, _COLORS.get(s["where"], "#888"),
                   f"{_ms(s['per_batch_s'])} per batch ({s['where']})") for s in report.get("stages") or []]
    parts.append(bar_chart("plot-stages", "Time per stage, per batch (ms)" if mode == "loop" else
                           "Time per stage, per batch on one thread (ms), at the best thread count", stage_rows))
    parts.append(bar_chart("plot-capacity", "Capacity vs demand (samples/s)", _capacity_rows(report)))
    parts.append('<p class="muted">Predictions come from the doctor\'s pipeline model (docs/doctor.md); '
                 "each assumes its fix alone is applied.</p></body></html>")
    return "".join(parts)


def _head_line(report):
    mode = report.get("mode")
    if mode == "loop":
        return _settings_line(report)
    if mode == "trace":
        t = report.get("trace") or {}
        return f"torch.profiler trace {t.get('path')} ({t.get('format')}, {t.get('events')} events)"
    return _pipeline_line(report)


def _step_section(step):
    """Inside the step: the one-line anatomy, the top ops, the sync sites, the copies."""
    rows = "".join(f"<tr><td>{escape(o['name'])}</td><td>{o['calls']}</td><td>{100 * o['share']:.0f}%</td></tr>"
                   for o in step.get("top_ops", []))
    syncs = "".join(f"<li>{escape(s['kind'])} ({escape(s['op'])}) at {escape(_where(s))}: {s['calls']} call(s), "
                    f"in {s['steps_with']} of {step['steps']} steps</li>" for s in step.get("syncs", []))
    copies = "".join(f"<li>{escape(c['direction'])} {escape(c['memory'])}: {c['calls']} call(s) at "
                     f"{escape(_where(c))}, {_ms(c['per_step_s'])} per step</li>" for c in step.get("copies", []))
    return ('<h2>Inside the step</h2><p id="step">' + escape(step_line(step)) + "</p>"
            + ('<table id="top-ops"><tr><th>op (top level)</th><th>calls</th><th>share of the step</th></tr>'
               + rows + "</table>" if rows else "")
            + (f'<p>Host-device syncs:</p><ul id="syncs">{syncs}</ul>' if syncs else "")
            + (f'<p>Copies:</p><ul id="copies">{copies}</ul>' if copies else "")
            + (f'<p class="muted">{escape(step["copies_note"])}</p>' if step.get("copies_note") else ""))


def _feedline_ops_table(report):
    """A feedline loader's ops: native or Python, busy time, GIL wait and held."""
    ops = (report.get("feedline") or {}).get("ops") or []
    if not ops:
        return ""
    rows = []
    for o in ops:
        items, py = o.get("items") or 0, bool(o.get("python"))
        gil = (f"<td>{_ms(o.get('gil_wait_s', 0.0) / items)}</td><td>{_ms(o.get('gil_held_s', 0.0) / items)}</td>"
               if py and items else "<td>-</td><td>-</td>")
        rows.append(f'<tr class="{"python" if py else "native"}"><td>{escape(o["name"])}</td>'
                    f'<td>{"Python" if py else "native"}</td><td>{o.get("items", 0)}</td>'
                    f'<td>{o.get("busy_s", 0.0):.3f} s</td><td>{_ms(o.get("per_item_s", 0.0))}</td>{gil}</tr>')
    return ('<h2>Loader ops</h2><table id="feedline-ops"><tr><th>op</th><th>runs</th><th>items</th>'
            '<th>busy (all threads)</th><th>per item</th><th>GIL wait per item</th><th>GIL held per item</th></tr>'
            + "".join(rows) + "</table>")


def _where(site):
    return f"{site['file']}:{site['line']}" if site.get("file") else "(no Python stack)"


def _pipeline_line(report):
    p = report.get("pipeline") or {}
    return (f"pipeline alone on {p.get('source')} · batch_size={p.get('batch_size')} · "
            f"transform={p.get('transform')} {p.get('size')}px")


def _findings_table(report):
    rows = []
    for f in report.get("findings", []):
        speedup = f.get("predicted_speedup")
        pred = ("-" if not (f.get("predicted_samples_per_s") and speedup) else
                f"unchanged ({_rate(f['predicted_samples_per_s'])} samples/s)" if abs(speedup - 1) < 0.01 else
                f"{_rate(f['predicted_samples_per_s'])} samples/s ({speedup:.2f}x)")
        rows.append(f'<tr><td>{f["rank"]}</td><td class="sev-{escape(f["severity"])}">{escape(f["severity"])}</td>'
                    f'<td><b>{escape(f["title"])}</b><br>{escape(f["summary"])}'
                    + (f'<br><i>Fix:</i> {escape(f["fix"])}' if f["fix"] else "") + '</td>'
                    f"<td>{escape(pred)}</td></tr>")
    return ('<h2>Findings</h2><table id="findings"><tr><th>#</th><th>severity</th><th>finding and fix</th>'
            '<th>predicted</th></tr>' + "".join(rows) + "</table>")
