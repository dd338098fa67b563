"""The terminal summary: the answer first, readable in ten seconds."""
import textwrap

from .rules import common as rc


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
        keys = ("num_threads", "batch_size", "ring_buffers", "source_kind", "seq_len", "packing")
        name = "feedline TokenLoader" if ld.get("type") == "TokenLoader" else "feedline Loader"
    else:
        keys, name = (), ld.get("type") or "iterable"
    return name + "  " + " ".join(f"{k}={s[k]}" for k in keys if k in s)


def _source(ev, source):
    """A capacity's source, with its window where it is the loop's own."""
    if source == "loop":
        return f"loop, {rc.steady_label(ev)}" if (ev.get("loop") or {}).get("steady_step_mean_s") else "loop"
    return source or "unknown"


def site_line(site):
    """The framework's loop and the user's step it calls (feedline.integrations)."""
    name = " ".join(x for x in (site["framework"], site.get("version"), site["loop"]) if x)
    if site.get("step"):
        name += f", step {site['step']}"
        if site.get("file"):
            name += f" ({site['file']}:{site.get('line')})"
    return f"in        {name}"


def step_line(step):
    """The step anatomy in one line (Doctor(profile_steps=N) or a trace)."""
    line = (f"step      {step['window']}: {_ms(step['step_mean_s'])} per step, "
            f"{100 * step['python_share']:.0f}% outside ops, {step['ops_per_step']:.0f} ops per step")
    if step.get("device"):
        line += f", device busy {100 * step['device']['busy_share']:.0f}%"
    if step.get("syncs"):
        line += f", {len(step['syncs'])} sync site(s)"
    return line + " (under the profiler)"


def what_if_line(w):
    """What feedline would give, measured, or why it was not."""
    if w.get("ran"):
        return (f"what-if   feedline.Loader on {w['files']} of your files: {_rate(w['samples_per_s'])} samples/s "
                f"({w['samples']} samples in {w['seconds']:.1f} s, {w['threads']} threads)")
    return f"what-if   not run: {w.get('reason')}"


def tokens_line(ev, tk):
    """Tokens through the loop, in the windows of the samples/s above it."""
    steady = tk.get("steady_tokens_per_s")
    rate, window = (steady, rc.steady_label(ev)) if steady else (tk.get("tokens_per_s"), rc.whole_label(ev))
    line = (f"tokens    {_rate(rate)} tokens/s ({window}); {tk['field']} [batch, {tk['seq_len']}], "
            f"{_rate(tk.get('tokens_per_s'))} tokens/s over the whole run")
    ld = tk.get("loader")
    if ld:
        line += f"; TokenLoader packing={ld['packing']}, {len(ld['sources'])} source(s)"
        if ld.get("padding_share"):
            line += (f", padding {100 * ld['padding_share']:.1f}% of each sequence: "
                     f"{_rate(tk.get('real_tokens_per_s'))} real tokens/s")
        if ld.get("weights"):
            line += f", weights {ld['weights']}"
    return line


def ranks_table(ev):
    """One row per rank (under torch.distributed), the slowest marked."""
    rk = ev.get("ranks")
    if not rk:
        return []
    out = [f"  ranks     {rk['world_size']} ({rk['backend']}), per step over each rank's steady state"
           + ("" if rk.get("collectives_timed") else "; collectives not seen: own = wait + step CPU"),
           "            rank  host              wait      step   collective   own       samples/s"]
    for r in rk["list"]:
        mark = "  <- slowest" if r["rank"] == rk["slowest"] else ""
        out.append(f"            {r['rank']:>4}  {r['host'][:16]:<16}  {_ms(r['wait_mean_s']):>8}  "
                   f"{_ms(r['step_mean_s']):>8}  {_ms(r['collective_mean_s']):>10}  {_ms(r['own_mean_s']):>8}  "
                   f"{_rate(r['samples_per_s']):>9}{mark}")
    return out


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


def feedline_ops(ev):
    """A feedline loader's ops, one row each: native or Python, busy time per
    sample on the threads, and for a Python op its GIL wait and held time."""
    ops = (ev.get("feedline") or {}).get("ops") or []
    if not any(o.get("python") for o in ops):
        return []  # all native: the per-batch line says it all
    width = max(len(o["name"]) for o in ops)
    out = ["  ops       per sample (busy on the threads; Python ops: waiting for the GIL / holding it)"]
    for o in ops:
        items = o.get("items") or 0
        row = f"            {o['name']:<{width}}  {'Python' if o.get('python') else 'native':<6}  " \
              f"{_ms(o['per_item_s']):>8}"
        if o.get("python") and items:
            row += (f"  GIL wait {_ms(o.get('gil_wait_s', 0.0) / items)}, held {_ms(o.get('gil_held_s', 0.0) / items)}"
                    f" ({o.get('gil_held_s', 0.0):.2f} s held in all)")
        out.append(row)
    return out


def _findings(ev, width, details=3):
    lines = []
    for f in ev.get("findings", []):
        pred = ""
        if f.get("predicted_samples_per_s") and (f.get("predicted_speedup") or 0) >= 1.01:
            pred = f"  -> ~{_rate(f['predicted_samples_per_s'])} samples/s ({f['predicted_speedup']:.2f}x)"
        elif (f.get("predicted_speedup") or 0) >= 1.01:  # trace mode: steps, no samples
            pred = f"  -> ~{f['predicted_speedup']:.2f}x the steps per second"
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
    if ev.get("mode") == "trace":
        return _trace_text(ev, width)
    loop, cap = ev.get("loop") or {}, ev.get("capacity") or {}
    starv = loop.get("starvation", 0.0)
    dev = loop.get("device")
    # One window per figure, named beside it (rules.common): the rate and the
    # waiting the findings use first, then the whole run.
    now_starv = rc._starvation(ev)
    state = "STARVED" if now_starv >= rc.STARVED else "fed"
    lines = textwrap.wrap(f"feedline doctor: {_settings_line(ev)}", width, subsequent_indent="  ")
    head = [f"  loop      {_rate(rc.current_rate(ev))} samples/s ({rc.rate_window(ev)}); "
            f"{100 * now_starv:.0f}% of the time waiting for data ({rc.starvation_window(ev)}): {state}",
            f"  whole run {loop.get('steps', 0)} steps, {loop.get('samples', 0)} samples in "
            f"{loop.get('wall_s', 0):.2f} s: {_rate(loop.get('samples_per_s'))} samples/s, {100 * starv:.0f}% "
            "waiting for data (start-up included)"]
    if loop.get("site"):
        head.insert(0, "  " + site_line(loop["site"]))
    tk = ev.get("tokens")
    if tk:
        head.append("  " + tokens_line(ev, tk))
    if dev:
        head.append(f"  device    idle {100 * dev['starvation']:.0f}% between steps "
                    f"(CUDA events, {dev['steady_steps']} of {dev['steps']} steps timed: {rc.steady_label(ev)})")
    lc, sc = cap.get("loader_samples_per_s") or {}, cap.get("step_samples_per_s") or {}
    head.append(f"  capacity  loader {_rate(lc.get('value'))} samples/s ({lc.get('source') or 'unknown'}), "
                f"step {_rate(sc.get('value'))} samples/s ({_source(ev, sc.get('source'))}): "
                f"bound by the {cap.get('bound') or '?'}")
    step = ev.get("step")
    if step:
        head.append("  " + step_line(step))
    wi = ev.get("what_if")
    if wi:
        head.append("  " + what_if_line(wi))
    for h in head:
        lines.extend(textwrap.wrap(h, width, subsequent_indent="            "))
    lines.extend(ranks_table(ev))
    lines.extend(feedline_ops(ev))
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


def _trace_text(ev, width):
    t, step = ev.get("trace") or {}, ev.get("step") or {}
    lines = textwrap.wrap(f"feedline doctor: torch.profiler trace {t.get('path')} ({t.get('format')}, "
                          f"{t.get('events')} events)", width, subsequent_indent="  ")
    if step:
        lines.extend(textwrap.wrap("  " + step_line(step), width, subsequent_indent="            "))
        top = ", ".join(f"{o['name']} {100 * o['share']:.0f}%" for o in step.get("top_ops", [])[:5])
        if top:
            lines.extend(textwrap.wrap("  top ops   " + top, width, subsequent_indent="            "))
        if step.get("copies_note"):
            lines.extend(textwrap.wrap("  copies    " + step["copies_note"], width, subsequent_indent="            "))
    lines.append("findings:")
    lines.extend(_findings(ev, width))
    return "\n".join(lines)
