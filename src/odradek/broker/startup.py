"""What a node checks and takes before it writes anything: the data directory and the ports.

`prepare` runs after the config is checked and before the first write: the data
directory's type and permissions, its lock (one process per directory, as Kafka's
`.lock`) and the listening sockets. Each refusal is a StartRefused with a one-line
message; a refused start leaves the data directory as it found it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from odradek.broker.config import Listener
from odradek.storage.dir_lock import LOCK_FILE, DataDirLock, DataDirLocked, acquire_data_dir_lock


class StartRefused(Exception):
    """The node cannot start; the message is the one line the user sees (exit code 2)."""


@dataclass(slots=True)
class Prepared:
    """The held data-directory lock and the bound listening sockets of a starting node."""

    data_dir: Path
    lock: DataDirLock
    sockets: list[socket.socket] = field(default_factory=list)
    # listener name -> its sockets (a node serves each listener kind with its own server)
    by_listener: dict[str, list[socket.socket]] = field(default_factory=dict)
    created_dir: Path | None = None  # the outermost directory this start created
    created_lock_file: bool = False
    # the admin HTTP listener's sockets (admin.listeners), served by broker.admin_http
    admin_sockets: list[socket.socket] = field(default_factory=list)

    def undo(self) -> None:
        """A start that failed: close the sockets, drop what we created in the directory."""
        for sock in [*self.sockets, *self.admin_sockets]:
            sock.close()
        self.sockets.clear()
        self.admin_sockets.clear()
        self.by_listener.clear()
        self.lock.release(remove=self.created_lock_file)
        _remove_created(self.data_dir, self.created_dir)

    def release(self) -> None:
        for sock in [*self.sockets, *self.admin_sockets]:
            sock.close()
        self.lock.release()


def check_data_dir(data_dir: Path) -> Path | None:
    """Refuse a data directory we could not use.

    Returns None when it exists already, else the outermost missing directory: like Kafka's
    log dirs, missing parents are created, and a failed start removes what it created.
    """
    if data_dir.exists():
        if not data_dir.is_dir():
            raise StartRefused(f"data directory {data_dir} is not a directory")
        if not os.access(data_dir, os.R_OK | os.W_OK | os.X_OK):
            raise StartRefused(f"data directory {data_dir} is not writable by this user "
                               "(permission denied)")
        return None
    outermost = data_dir
    parent = data_dir.parent
    while not parent.exists() and parent != parent.parent:
        outermost, parent = parent, parent.parent
    if not parent.is_dir():
        raise StartRefused(f"cannot create data directory {data_dir}: {parent} is not a "
                           "directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StartRefused(f"cannot create data directory {data_dir}: {parent} is not "
                           "writable by this user (permission denied)")
    return outermost


def _remove_created(data_dir: Path, outermost: Path | None) -> None:
    """Remove the directories a failed start created, innermost first, if still empty."""
    if outermost is None:
        return
    path = data_dir
    while True:
        with contextlib.suppress(OSError):  # not empty: something else wrote there
            path.rmdir()
        if path == outermost or path == path.parent:
            return
        path = path.parent


def lock_data_dir(data_dir: Path) -> tuple[DataDirLock, Path | None, bool]:
    """Create the directory if needed and lock it.

    Returns (lock, the outermost directory created or None, created the lock file).
    """
    created = check_data_dir(data_dir)
    if created is not None:
        try:
            data_dir.mkdir(parents=True)
        except FileExistsError:
            created = None  # created under us; the lock decides who may use it
        except OSError as exc:
            _remove_created(data_dir, created)
            raise StartRefused(f"cannot create data directory {data_dir}: "
                               f"{exc.strerror or exc}") from None
    had_lock_file = (data_dir / LOCK_FILE).exists()
    try:
        lock = acquire_data_dir_lock(data_dir)
    except DataDirLocked as exc:
        raise StartRefused(str(exc)) from None
    except OSError as exc:
        _remove_created(data_dir, created)
        raise StartRefused(f"cannot lock data directory {data_dir}: "
                           f"{exc.strerror or exc}") from None
    return lock, created, not had_lock_file


def bind_listener(lst: Listener) -> list[socket.socket]:
    """Bound, non-blocking sockets for one listener (an empty host: all interfaces).

    They are bound now, so a port another process listens on is refused before anything
    is written, but listen only when the node serves (Server.start): until then a client
    is refused at connect, as before, instead of waiting in a backlog for a node that is
    still recovering. SO_REUSEADDR lets a restart bind next to its old TIME_WAIT
    connections; two nodes starting on one port at once both bind, and the second fails
    at listen (a late, rare refusal).
    """
    host = lst.host or None
    try:
        infos = socket.getaddrinfo(host, lst.port, socket.AF_UNSPEC, socket.SOCK_STREAM,
                                   0, socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartRefused(f"cannot listen on {lst.name}://{lst.host}:{lst.port}: host "
                           f"{lst.host!r} not resolved ({exc.strerror})") from None
    sockets: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, addr in infos:
            if (family, addr) in seen:
                continue
            seen.add((family, addr))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                # as asyncio's create_server: one socket per family, not a dual-stack one
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(addr)
            except OSError as exc:
                if exc.errno == errno.EADDRNOTAVAIL and len(infos) > 1 and host is None:
                    sockets.pop().close()  # e.g. no IPv6 on this machine: the others serve
                    continue
                raise
            sock.setblocking(False)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise StartRefused(f"cannot listen on {lst.name}://{lst.host}:{lst.port}: "
                           f"{exc.strerror or exc}") from None
    return sockets


def prepare(data_dir: Path, listeners: list[Listener],
            admin: list[Listener] | None = None) -> Prepared:
    """Lock the data directory, then bind every listener (the Kafka ones, then the admin
    HTTP's); undone on the first refusal."""
    lock, created_dir, created_lock_file = lock_data_dir(data_dir)
    prepared = Prepared(data_dir, lock, created_dir=created_dir,
                        created_lock_file=created_lock_file)
    try:
        for lst in listeners:
            bound = bind_listener(lst)
            prepared.by_listener[lst.name] = bound
            prepared.sockets += bound
        for lst in admin or ():
            prepared.admin_sockets += bind_listener(lst)
    except BaseException:
        prepared.undo()
        raise
    return prepared
