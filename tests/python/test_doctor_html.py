"""feedline.doctor's HTML report (html.py), rendered in headless Chromium."""
import re
import shutil
import subprocess

import pytest


# -- HTML in Chromium -------------------------------------------------------------------
def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("headless Chromium is not installed (scripts/install-deps.sh installs Debian's chromium)")


def _render(chromium, html_path, out_dir, *extra):
    cmd = [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
           f"--user-data-dir={out_dir / 'profile'}", "--enable-logging=stderr", "--v=0", *extra,
           html_path.as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def _console_errors(stderr):
    return [l for l in stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l or "Failed to load" in l]


def test_html_report_renders_in_headless_chromium_without_errors(report, tmp_path):
    chromium = _chromium()
    html = report.html()
    # Self-contained: no script, no stylesheet link, nothing fetched.
    assert "<script" not in html and "<link" not in html and "src=" not in html and "url(" not in html
    assert not re.search(r'https?://(?!www\.w3\.org/2000/svg")', html)
    page = tmp_path / "report.html"
    report.save_html(page)

    dom = _render(chromium, page, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    for plot in ("plot-starvation", "plot-stages", "plot-capacity"):
        assert re.search(rf'<svg id="{plot}"[^>]*>.*?</svg>', dom.stdout, re.S), f"{plot} missing from the DOM"
    assert 'id="findings"' in dom.stdout and "SlowAugment" in dom.stdout
    assert not _console_errors(dom.stderr), _console_errors(dom.stderr)

    shot = tmp_path / "report.png"
    run = _render(chromium, page, tmp_path, f"--screenshot={shot}", "--window-size=820,1600",
                  "--hide-scrollbars")
    assert run.returncode == 0, run.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    assert not _console_errors(run.stderr), _console_errors(run.stderr)


def test_the_console_error_check_does_catch_errors(tmp_path):
    # The check above would pass vacuously if Chromium's log said nothing.
    chromium = _chromium()
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><script>undefinedFunction()</script></body></html>")
    run = _render(chromium, page, tmp_path, "--dump-dom")
    assert _console_errors(run.stderr)
