"""A real S3-compatible server for the tests: moto's standalone server
(moto[server] in the cached venv scripts/requirements-s3.txt names, found
through FEEDLINE_S3_VENV), started on 127.0.0.1 and stopped by the tests,
and a fault-injecting HTTP proxy in front of it that a test drives: 503
SlowDown answers, connections reset before an answer, and bodies cut short
after some bytes, every Nth request."""
import os
import pathlib
import socket
import subprocess
import threading
import time

from loopback import free_port, wait_for_port


def venv():
    v = os.environ.get("FEEDLINE_S3_VENV")
    return pathlib.Path(v) if v and (pathlib.Path(v) / "bin" / "moto_server").exists() else None


class Moto:
    def __init__(self):
        self.port = free_port()
        self.proc = subprocess.Popen([str(venv() / "bin" / "moto_server"), "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port)
        self.url = f"http://127.0.0.1:{self.port}"

    def boto(self, script):
        """Runs `script` with `s3` a boto3 client of this server (the venv's
        boto3: the reference client)."""
        prelude = ("import boto3\n"
                   f"s3 = boto3.client('s3', endpoint_url='{self.url}', region_name='us-east-1',"
                   "aws_access_key_id='testing', aws_secret_access_key='testing')\n")
        out = subprocess.run([str(venv() / "bin" / "python"), "-c", prelude + script],
                             capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(out.stderr)
        return out.stdout

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def _read_request(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return head, body


def _forward(port, head, body):
    lines = [ln for ln in head.split(b"\r\n") if not ln.lower().startswith(b"connection:")]
    request = b"\r\n".join(lines) + b"\r\nConnection: close\r\n\r\n" + body
    with socket.create_connection(("127.0.0.1", port)) as up:
        up.sendall(request)
        out = b""
        while True:
            chunk = up.recv(65536)
            if not chunk:
                return out
            out += chunk


SLOW_DOWN = (b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n")
SLOW_DOWN_BODY = (b"<?xml version='1.0'?><Error><Code>SlowDown</Code>"
                  b"<Message>Please reduce your request rate.</Message></Error>")


class FaultProxy:
    """Between the client and moto. `fault` is None or one of "503",
    "reset", "cut"; it hits every `every`-th request (counted in `seen`),
    so a retry of the same request goes through. `delay_s` is added before
    every answer's first byte (a store's latency, for the doctor's tests and
    the benchmarks)."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.fault = None
        self.every = 3
        self.delay_s = 0.0
        self.seen = 0
        self.injected = 0
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.closed = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        try:
            self._answer(conn)
        except OSError:
            pass  # the client went away (a reset, a closed pool): nothing to answer

    def _answer(self, conn):
        with conn:
            while True:
                req = _read_request(conn)
                if req is None:
                    return
                with self.lock:
                    self.seen += 1
                    hit = self.fault is not None and self.seen % self.every == 0
                    fault = self.fault if hit else None
                    self.injected += bool(hit)
                if fault == "503":
                    conn.sendall(SLOW_DOWN % len(SLOW_DOWN_BODY) + SLOW_DOWN_BODY)
                    continue
                if fault == "reset":
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    return
                if self.delay_s > 0:
                    time.sleep(self.delay_s)
                answer = _forward(self.upstream, *req)
                if fault == "cut":
                    head, _, body = answer.partition(b"\r\n\r\n")
                    if len(body) > 1:
                        conn.sendall(head + b"\r\n\r\n" + body[: len(body) // 2])
                        return
                conn.sendall(answer)

    def close(self):
        self.closed = True
        self.sock.close()
