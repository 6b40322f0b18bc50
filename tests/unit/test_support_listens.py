"""The tests' readiness check: a node is up when *its* socket listens on the port, not when
anything answers there (another test's listener may hold a randomly drawn port first)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from tests.support.broker import free_port, listens


def test_own_listener_is_seen() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        assert listens(os.getpid(), server.getsockname()[1])


def test_bound_but_not_listening_is_not_seen() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        assert not listens(os.getpid(), sock.getsockname()[1])
    assert not listens(os.getpid(), free_port())


def test_another_process_listener_is_not_ours() -> None:
    port = free_port()
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import socket, sys; s = socket.create_server(('127.0.0.1', int(sys.argv[1]))); "
         "print('up', flush=True); sys.stdin.read()", str(port)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "up\n"
        assert listens(child.pid, port)
        assert not listens(os.getpid(), port)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(10)
