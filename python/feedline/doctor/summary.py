"""The terminal summary: the answer first, readable in ten seconds."""
import textwrap


def _ms(s):
    if s is None:
        return "-"
    return f"{s * 1e3:.1f} ms" if s >= 1e-3 or s == 0 else f"{s * 1e6:.0f} us"


def _rate(x):
    return "-" if not x else f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def _settings_line(ev):
    ld = ev["loader"]
    s = ld.get("settings") or {}
    keys: tuple[str, ...]
    if ld["kind"] == "torch":
        keys = ("num_workers", "batch_size", "pin_memory", "persistent_workers", "prefetch_factor")
        name = "torch DataLoader"
    elif ld["kind"] == "feedline":
        keys = ("num_threads", "batch_size", "ring_buffers", "source_kind")
        name = "feedline Loader"
    else:
        keys, name = (), ld.get("type") or "iterable"
    return name + "  " + " ".join(f"{k}={s[k]}" for k in keys if k in s)


def tuner_line(ev):
    """The autotuner's state and latest decision, for a feedline loader."""
    t = (ev.get("feedline") or {}).get("tuner")
    if not t:
        return ""
    auto = lambda on: "auto" if on else "fixed"  # noqa: E731
    line = (f"threads {t['threads']} of {t['max_threads']} ({auto(t['threads_auto'])}, cpu_budget "
            f"{t['cpu_budget']}), ring {t['ring_depth']} ({auto(t['ring_auto'])}), memory "
            f"{t['peak_charged_bytes'] / 2**20:.0f} of {t['ram_budget'] / 2**20:.0f} MiB")
    if t.get("read_ahead_auto"):
        line += f", read-ahead {t['read_ahead_in_flight']} in flight"
    if t.get("log"):
        line += f"; {t['changes']} decisions, latest: {t['log'][-1]}"
    return line


def _findings(ev, width, details=3):
    lines = []
    for f in ev.get("findings", []):
        pred = ""
        if f.get("predicted_samples_per_s") and (f.get("predicted_speedup") or 0) >= 1.01:
            pred = f"  -> ~{_rate(f['predicted_samples_per_s'])} samples/s ({f['predicted_speedup']:.2f}x)"
        lines.extend(textwrap.wrap(f" {f['rank']}. [{f['severity']}] {f['title']}{pred}", width,
                                   subsequent_indent="      "))
        if f["rank"] <= details:
            for text in (f["summary"], ("fix: " + f["fix"]) if f["fix"] else ""):
                if text:
                    lines.extend(textwrap.wrap(text, width, initial_indent="    ", subsequent_indent="      "))
    return lines


def text(ev, width=100):
    if ev.get("mode") == "pipeline":
        return _pipeline_text(ev, width)
    loop, cap = ev.get("loop") or {}, ev.get("capacity") or {}
    starv = loop.get("starvation", 0.0)
    steady = loop.get("steady_starvation")
    dev = loop.get("device")
    state = "STARVED" if (steady if steady is not None else starv) >= 0.10 else "fed"
    lines = textwrap.wrap(f"feedline doctor: {_settings_line(ev)}", width, subsequent_indent="  ")
    head = [f"  loop      {loop.get('steps', 0)} steps, {loop.get('samples', 0)} samples in "
            f"{loop.get('wall_s', 0):.2f} s: {_rate(loop.get('samples_per_s'))} samples/s "
            f"({_rate(loop.get('steady_samples_per_s'))} steady), {100 * starv:.0f}% of wall time waiting for data"
            + (f" ({100 * steady:.0f}% in steady state)" if steady is not None else "") + f": {state}"]
    if dev:
        head.append(f"  device    idle {100 * dev['starvation']:.0f}% between steps "
                    f"(CUDA events, {dev['steps']} steps)")
    lc, sc = cap.get("loader_samples_per_s") or {}, cap.get("step_samples_per_s") or {}
    head.append(f"  capacity  loader {_rate(lc.get('value'))} samples/s ({lc.get('source') or 'unknown'}), "
                f"step {_rate(sc.get('value'))} samples/s ({sc.get('source') or 'unknown'}): "
                f"bound by the {cap.get('bound') or '?'}")
    for h in head:
        lines.extend(textwrap.wrap(h, width, subsequent_indent="            "))
    tl = tuner_line(ev)
    if tl:
        lines.extend(textwrap.wrap("  tuner     " + tl, width, subsequent_indent="            "))
    stages = ev.get("stages") or []
    if stages:
        parts = [f"{s['name']} {_ms(s['per_batch_s'])}" for s in stages]
        lines.extend(textwrap.wrap("per batch " + " | ".join(parts), width, initial_indent="  ",
                                   subsequent_indent="            "))
    lines.append("findings:")
    lines.extend(_findings(ev, width))
    return "\n".join(lines)


def _pipeline_text(ev, width):
    p = ev.get("pipeline") or {}
    lines = [f"feedline doctor: pipeline alone on {p.get('source')} (batch_size={p.get('batch_size')}, "
             f"transform={p.get('transform')}, {ev['machine']['cores']} cores)",
             "  threads  samples/s  efficiency  "
             + "  ".join(f"{s['name']:>16}" for s in (ev["scan"][0].get("stages") or []))]
    eff = (p.get("summary") or {}).get("efficiency") or {}
    for s in ev["scan"]:
        e = eff.get(s["threads"], eff.get(str(s["threads"])))
        cells = "  ".join(f"{_ms(st['per_sample_s']) + '/sample':>16}" for st in s.get("stages") or [])
        eff_cell = "-" if e is None else f"{100 * e:.0f}%"
        lines.append(f"  {s['threads']:>7}  {_rate(s['samples_per_s']):>9}  {eff_cell:>10}  {cells}")
    summ = p.get("summary") or {}
    if summ:
        lines.append(f"  best      {_rate(summ.get('best_samples_per_s'))} samples/s at {summ.get('best_threads')} "
                     f"thread(s); {_rate(summ.get('per_core_samples_per_s'))} samples/s per core; "
                     f"bottleneck: {summ.get('bottleneck')}")
        if summ.get("answer"):
            lines.extend(textwrap.wrap("target    " + summ["answer"], width, initial_indent="  ",
                                       subsequent_indent="            "))
    lines.append("findings:")
    lines.extend(_findings(ev, width))
    return "\n".join(lines)
