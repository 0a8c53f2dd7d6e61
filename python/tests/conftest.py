"""What the suite shares: a real ``onesided-server`` (the binary cargo built) on a free port
with a fresh data directory, an admin connection, fixtures of attached ranks, and running
one function per rank in threads of this process."""

from __future__ import annotations

import itertools
import os
import pathlib
import queue
import secrets
import subprocess
import tempfile
import threading
import time
from typing import Callable, Iterator, List, Optional, Sequence, TypeVar

import pytest

import onesided

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
# how long a rank may take before the test fails instead of hanging
RANK_TIMEOUT = 60.0
_names = itertools.count()

T = TypeVar("T")


def unique(prefix: str) -> str:
    """A name unique in this test run."""
    return "{}-{}-{}".format(prefix, os.getpid(), next(_names))


def server_binary() -> pathlib.Path:
    explicit = os.environ.get("ONESIDED_SERVER")
    if explicit:
        return pathlib.Path(explicit)
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPOSITORY / "target"))
    return target / "debug" / "onesided-server"


class Server:
    """``onesided-server --listen 127.0.0.1:0`` on a temporary data directory, up to the line
    that says where it listens (no sleeps: its own log line is the readiness signal)."""

    url: str

    def __init__(self, *extra: str) -> None:
        binary = server_binary()
        if not binary.exists():
            pytest.fail(
                "{} is missing: build it with `cargo build -p onesided-server` or set "
                "ONESIDED_SERVER (python/test.sh does both)".format(binary)
            )
        self.data = tempfile.TemporaryDirectory(prefix="onesided-py-")
        self.token = secrets.token_hex(24)
        self.lines: List[str] = []
        env = dict(os.environ, RUST_LOG="info", NO_COLOR="1")
        self.process = subprocess.Popen(
            [
                str(binary),
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                self.data.name,
                "--admin-token",
                self.token,
                *extra,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            text=True,
        )
        seen: queue.Queue[Optional[str]] = queue.Queue()
        threading.Thread(target=self._read, args=(seen,), daemon=True).start()
        deadline = time.monotonic() + 60
        while True:
            left = deadline - time.monotonic()
            try:
                line = seen.get(timeout=max(left, 0.01))
            except queue.Empty:
                line = None
            if line is None or left <= 0:
                self.stop()
                pytest.fail("the server did not start:\n" + "".join(self.lines))
            if line is not None and "address=" in line:
                address = line.split("address=", 1)[1].split()[0]
                self.url = "http://" + address
                return

    def _read(self, seen: queue.Queue[Optional[str]]) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            seen.put(line)
        seen.put(None)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.data.cleanup()


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    running = Server()
    yield running
    running.stop()


@pytest.fixture(scope="session")
def admin(server: Server) -> onesided.Admin:
    return onesided.Admin(server.url, server.token)


class Fixture:
    """A world of ``nranks`` ranks, each attached once (one session per rank, as a service
    would hold them); ``windows(spec)`` creates a window and opens it on every rank."""

    def __init__(self, server: Server, admin: onesided.Admin, nranks: int) -> None:
        self.server = server
        self.admin = admin
        self.world = admin.create_world(unique("py"), nranks)
        self.sessions = [
            onesided.Session.attach(server.url, token) for token in self.world.tokens
        ]

    def windows(self, spec: Optional[onesided.WindowSpec] = None) -> List[onesided.Window]:
        if spec is None:
            spec = onesided.WindowSpec.of(unique("w"), len(self.sessions), 2, "i64")
        self.admin.create_window(self.world.name, spec)
        return [session.window(spec.name) for session in self.sessions]


@pytest.fixture
def pair(server: Server, admin: onesided.Admin) -> Fixture:
    """Two attached ranks of a fresh world."""
    return Fixture(server, admin, 2)


def ranks(
    windows: Sequence[onesided.Window], program: Callable[[int, onesided.Window], T]
) -> List[Optional[T]]:
    """Runs ``program(rank, window)`` for every rank at once, each in its own thread, and
    returns what each returned (index = rank). The first rank to raise fails the test with its
    exception (the others may wait for it forever); so does a rank that is not done within
    RANK_TIMEOUT. The threads are daemons: a rank stuck in a barrier does not keep the run
    alive."""
    results: List[Optional[T]] = [None] * len(windows)
    failures: queue.Queue[BaseException] = queue.Queue()
    done: queue.Queue[int] = queue.Queue()

    def run(rank: int, window: onesided.Window) -> None:
        try:
            results[rank] = program(rank, window)
        except BaseException as failure:  # handed to the test's thread
            failures.put(failure)
        finally:
            done.put(rank)

    for rank, window in enumerate(windows):
        threading.Thread(target=run, args=(rank, window), daemon=True).start()
    deadline = time.monotonic() + RANK_TIMEOUT
    for _ in windows:
        try:
            done.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            pytest.fail("the ranks did not finish within {} s".format(RANK_TIMEOUT))
        if not failures.empty():
            raise failures.get()
    return results
