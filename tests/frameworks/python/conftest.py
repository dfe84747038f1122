"""Starts one server per test (cairn by default, redis-server with FRAMEWORK_SERVER=redis).

A test marked `@pytest.mark.needs("XADD", ...)` uses a framework that needs commands cairn may
not have yet. When the server under test answers `COMMAND INFO` for one of them with nothing,
the test still runs; a failure is then reported as an expected failure with the reason
"needs <command>" (and a pass as an error, so the marker is removed once it is not needed).
With every needed command present the test is an ordinary test.
"""

import os
import pathlib
import socket
import subprocess
import tempfile
import time

import pytest
import redis

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]


def pytest_configure(config):
    config.addinivalue_line("markers", "needs(*commands): commands the framework needs")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_binary():
    if os.environ.get("FRAMEWORK_SERVER") == "redis":
        return "redis-server"
    path = os.environ.get("CAIRN_SERVER", "target/debug/cairn-server")
    p = pathlib.Path(path)
    return str(p if p.is_absolute() else REPO_ROOT / p)


class Server:
    def __init__(self):
        self.port = _free_port()
        self.dir = tempfile.mkdtemp(prefix="fw-")
        self.log = open(os.path.join(self.dir, "server.log"), "w")
        self.proc = subprocess.Popen(
            [server_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", self.dir],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        deadline = time.monotonic() + 20
        while True:
            try:
                if self.client().ping():
                    break
            except redis.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server did not start: {server_binary()}")
                time.sleep(0.05)

    def client(self, **kw):
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)

    def missing(self, commands):
        # Each command sent with no arguments: an unknown one answers "unknown command",
        # a known one an arity error (or a reply).
        r = self.client()
        out = []
        for c in commands:
            try:
                r.execute_command(*c.split())
            except redis.ResponseError as e:
                if "unknown command" in str(e) or "unknown subcommand" in str(e):
                    out.append(c)
        return out

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # An expected "needs <command>" failure also says what the framework hit, so a failure
    # for another reason is visible in the summary.
    outcome = yield
    report = outcome.get_result()
    if getattr(report, "wasxfail", None) and call.excinfo is not None:
        first = str(call.excinfo.value).strip().splitlines()
        report.wasxfail += f" (failed with {call.excinfo.typename}: {first[0] if first else ''})"[:300]


@pytest.fixture
def server(request):
    srv = Server()
    marker = request.node.get_closest_marker("needs")
    if marker:
        missing = srv.missing(marker.args)
        if missing:
            request.node.add_marker(pytest.mark.xfail(
                reason="needs " + " ".join(missing), strict=True))
    yield srv
    if srv.proc.poll() is not None:
        pytest.fail(f"server exited with {srv.proc.returncode}")
    srv.stop()
