"""The tuner sizes read-ahead for a remote source (issue 7): a packed dataset
behind a real HTTP server on 127.0.0.1 that answers every range request
after a fixed delay (a far-away object store). The tuner must keep about
rate x latency fetches in flight, and that must beat one fetch at a time."""
import http.server
import pathlib
import threading
import time

import pytest

import feedline

DELAY_S = 0.02


class _LatencyHandler(http.server.SimpleHTTPRequestHandler):
    """Files under the server's directory, with single-range GETs, each
    answered DELAY_S after it arrives."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self._serve(head=True)

    def do_GET(self):
        self._serve(head=False)

    def _serve(self, head):
        time.sleep(DELAY_S)
        path = pathlib.Path(self.translate_path(self.path))
        if not path.is_file():
            self.send_error(404)
            return
        size = path.stat().st_size
        begin, end = 0, size - 1
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            a, b = rng[len("bytes="):].split("-")
            begin, end = int(a), min(int(b) if b else size - 1, size - 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {begin}-{end}/{size}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(end - begin + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if not head:
            with open(path, "rb") as f:
                f.seek(begin)
                self.wfile.write(f.read(end - begin + 1))


@pytest.fixture(scope="module")
def slow_server(packed):
    handler = lambda *a, **k: _LatencyHandler(*a, directory=str(packed / "www"), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/ds"
    server.shutdown()
    server.server_close()


def _rate(url, read_ahead_threads, batches=24):
    loader = feedline.RecordLoader(url, batch_size=8, shuffle=True, num_threads=2, cpu_budget=2,
                                   read_ahead_bytes=16 << 20, read_ahead_threads=read_ahead_threads,
                                   max_record_bytes=1 << 20)
    got, t0 = 0, None
    while got < batches:
        for _ in loader:
            got += 1
            if got == 6:
                t0 = time.perf_counter()
            if got == batches:
                break
    rate = (batches - 6) * 8 / (time.perf_counter() - t0)
    stats = loader.stats()
    loader.close()
    return rate, stats


def test_tuner_keeps_rate_times_latency_fetches_in_flight(slow_server):
    rate, stats = _rate(slow_server, read_ahead_threads=32)
    t = stats["tuner"]
    assert t["read_ahead_auto"]
    in_flight = t["read_ahead_in_flight"]
    # Little's law with the tuner's slack: at `rate` records/s and >= 20 ms a
    # fetch, at least rate x 0.02 must be in flight to sustain it.
    assert in_flight >= max(2, int(rate * DELAY_S)), (rate, in_flight, t["log"])
    assert in_flight <= 32
    assert any("read-ahead" in line for line in t["log"]), t["log"]


def test_tuned_read_ahead_beats_one_fetch_at_a_time(slow_server):
    tuned, _ = _rate(slow_server, read_ahead_threads=32)
    serial, _ = _rate(slow_server, read_ahead_threads=1)
    # One fetch at a time caps at 1 / 20 ms = 50 records/s plus what the two
    # workers fetch themselves on misses.
    print(f"tuned {tuned:.0f} records/s, one fetch at a time {serial:.0f}")
    assert tuned > 2 * serial, (tuned, serial)
