"""Network namespaces joined by a bridge, iptables inside them, and cleanup that always runs.

One `Net` per harness run: a Linux bridge in the root namespace holding the first address of
a private /24, and per node a namespace with a veth pair (host end on the bridge, the other
end renamed `eth0` inside the namespace, holding address .10+i). Clients in the root
namespace reach every node over the bridge; nodes reach each other the same way, so an
iptables rule inside one node's namespace cuts exactly the links it names.

Every name starts with `odj<pid><letter>` (the pid of the process that made it, and a
letter per net it made). Cleanup runs on
`close()`, at interpreter exit (atexit), on SIGTERM/SIGHUP (a handler turns them into
SystemExit so `finally` blocks and atexit run) and SIGINT (KeyboardInterrupt does the same);
a later run removes whatever a killed run left (`sweep_stale`): namespaces, links and tmpfs
mounts whose owning pid is gone, killing the processes still inside those namespaces. The
iptables rules live only inside the namespaces, so deleting a namespace deletes its rules.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterable
from pathlib import Path
from types import FrameType

__all__ = ["PREFIX", "Net", "ip", "leftovers", "sweep_stale"]

PREFIX = "odj"
SUBNET_BASE = "10.203"
_NAME = re.compile(rf"^{PREFIX}(\d+)")
_live: set[Net] = set()
_lock = threading.Lock()
_handlers_installed = False
_made = 0  # nets made by this process: the letter after the pid in their names


def run(*args: str, check: bool = True, input: str | None = None) -> str:
    """A command whose failure is an error naming it (stderr included)."""
    proc = subprocess.run(list(args), capture_output=True, text=True, input=input)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def ip(*args: str, check: bool = True) -> str:
    return run("ip", *args, check=check)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner(name: str) -> int | None:
    m = _NAME.match(name)
    return int(m.group(1)) if m else None


def namespaces() -> list[str]:
    return [line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()]


def links() -> list[str]:
    out = []
    for line in ip("-o", "link", "show").splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            out.append(parts[1].strip().split("@")[0])
    return out


def tmpfs_mounts() -> list[tuple[str, str]]:
    """(source, mount point) of every mount whose source names one of ours."""
    out = []
    for line in Path("/proc/mounts").read_text().splitlines():
        source, point = line.split()[:2]
        if source.startswith(PREFIX):
            out.append((source, point.replace("\\040", " ")))
    return out


def ns_pids(ns: str) -> list[int]:
    return [int(p) for p in ip("netns", "pids", ns, check=False).split()]


def kill_ns_processes(ns: str) -> None:
    """SIGKILL everything inside `ns` (SIGCONT first: a stopped process dies only when run)."""
    for pid in ns_pids(ns):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            os.kill(pid, signal.SIGCONT)
    for pid in ns_pids(ns):
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)


def _remove(nss: Iterable[str], lnks: Iterable[str], mounts: Iterable[str]) -> None:
    for ns in nss:
        kill_ns_processes(ns)
        ip("netns", "del", ns, check=False)
    for link in lnks:
        ip("link", "del", link, check=False)
    for point in mounts:
        run("umount", "-l", point, check=False)


def sweep_stale() -> list[str]:
    """Remove namespaces, links and tmpfs mounts of runs whose process is gone; the names."""
    dead = lambda name: (o := _owner(name)) is not None and not _pid_alive(o)  # noqa: E731
    nss = [n for n in namespaces() if dead(n)]
    lnks = [n for n in links() if dead(n)]
    mounts = [p for s, p in tmpfs_mounts() if dead(s)]
    _remove(nss, lnks, mounts)
    return nss + lnks + mounts


def leftovers(owner: int | str | None = None) -> list[str]:
    """What of ours still exists (namespaces, links, mounts): of any run by default, of the
    process with pid `owner`, or of the one net whose tag is `owner`. A process can hold
    several nets at once (the shared cluster of the short runs lives until exit), so a check
    of one net's cleanup names its tag."""
    if owner is None:
        mine = lambda n: n.startswith(PREFIX)  # noqa: E731
    elif isinstance(owner, int):
        mine = lambda n: _owner(n) == owner  # noqa: E731
    else:
        mine = lambda n: n.startswith(owner)  # noqa: E731
    return ([f"netns {n}" for n in namespaces() if mine(n)]
            + [f"link {n}" for n in links() if mine(n)]
            + [f"mount {p}" for s, p in tmpfs_mounts() if mine(s)])


def _cleanup_all() -> None:
    with _lock:
        nets = list(_live)
    for net in nets:
        net.close()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    # SystemExit unwinds through every `finally` and then atexit: the same path as a clean end
    raise SystemExit(128 + signum)


def _install_handlers() -> None:
    global _handlers_installed
    if _handlers_installed:
        return
    _handlers_installed = True
    atexit.register(_cleanup_all)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                signal.signal(sig, _on_signal)


def _free_subnet(start: int) -> str:
    used = ip("-4", "-o", "addr", "show")
    for k in range(254):
        octet = (start + k) % 250 + 1
        net = f"{SUBNET_BASE}.{octet}."
        if net not in used:
            return f"{SUBNET_BASE}.{octet}"
    raise RuntimeError(f"no free /24 left under {SUBNET_BASE}.0.0/16")


class Net:
    """A bridge and `size` namespaces with one address each; `close()` removes them all."""

    def __init__(self, size: int) -> None:
        global _made
        _install_handlers()
        sweep_stale()
        self.pid = os.getpid()
        with _lock:
            letter = "abcdefghijklmnopqrstuvwxyz"[_made % 26]
            _made += 1
        self.tag = f"{PREFIX}{self.pid}{letter}"  # at most 15 chars with "h<i>" after it
        self.size = size
        self.subnet = _free_subnet(self.pid)
        self.bridge = f"{self.tag}b"
        self.closed = False
        with _lock:
            _live.add(self)
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    # ---------------------------------------------------------------- names

    def ns(self, i: int) -> str:
        return f"{self.tag}-n{i}"

    def host_link(self, i: int) -> str:
        return f"{self.tag}h{i}"

    def addr(self, i: int) -> str:
        """The address of node i (1-based) inside its namespace."""
        return f"{self.subnet}.{10 + i}"

    @property
    def gateway(self) -> str:
        """The bridge's address: the root namespace as the nodes see it (clients, proxy)."""
        return f"{self.subnet}.1"

    # ---------------------------------------------------------------- build

    def _build(self) -> None:
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for i in range(1, self.size + 1):
            ns, host, peer = self.ns(i), self.host_link(i), f"{self.tag}p{i}"
            ip("netns", "add", ns)
            ip("link", "add", host, "type", "veth", "peer", "name", peer)
            ip("link", "set", peer, "netns", ns)
            ip("link", "set", host, "master", self.bridge)
            ip("link", "set", host, "up")
            ip("-n", ns, "link", "set", peer, "name", "eth0")
            ip("-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", ns, "route", "add", "default", "via", self.gateway)

    def exec_prefix(self, i: int) -> list[str]:
        """Prefix of a command run inside node i's namespace (`ip netns exec` execs it, so
        the pid the caller gets is the command's own)."""
        return ["ip", "netns", "exec", self.ns(i)]

    # ---------------------------------------------------------------- iptables

    def iptables(self, i: int, *args: str) -> None:
        run("ip", "netns", "exec", self.ns(i), "iptables", "-w", *args)

    def cut(self, i: int, j: int) -> None:
        """Drop every packet between nodes i and j, both ways (rules in i's namespace)."""
        self.iptables(i, "-A", "INPUT", "-s", self.addr(j), "-j", "DROP")
        self.iptables(i, "-A", "OUTPUT", "-d", self.addr(j), "-j", "DROP")

    def isolate_from_clients(self, i: int) -> None:
        """Drop traffic between node i and the root namespace (clients, the proxy)."""
        self.iptables(i, "-A", "INPUT", "-s", self.gateway, "-j", "DROP")
        self.iptables(i, "-A", "OUTPUT", "-d", self.gateway, "-j", "DROP")

    def partition(self, groups: list[list[int]]) -> None:
        """Nodes in different groups cannot talk; clients still reach every node."""
        for a, ga in enumerate(groups):
            for gb in groups[a + 1:]:
                for i in ga:
                    for j in gb:
                        self.cut(i, j)

    def heal(self) -> None:
        for i in range(1, self.size + 1):
            self.iptables(i, "-F", "INPUT")
            self.iptables(i, "-F", "OUTPUT")

    def rules(self, i: int) -> str:
        return run("ip", "netns", "exec", self.ns(i), "iptables", "-w", "-S")

    # ---------------------------------------------------------------- tmpfs

    def mount_tmpfs(self, path: Path, size_mb: int) -> None:
        """A tmpfs of `size_mb` at `path`, its source named after us so a sweep finds it."""
        path.mkdir(parents=True, exist_ok=True)
        run("mount", "-t", "tmpfs", "-o", f"size={size_mb}m", self.tag, str(path))

    # ---------------------------------------------------------------- cleanup

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with _lock:
            _live.discard(self)
        if os.getpid() != self.pid:  # a forked child must not tear down its parent's net
            return
        nss = [n for n in namespaces() if n.startswith(f"{self.tag}-")]
        lnks = [n for n in links() if n.startswith(self.tag)]
        mounts = [p for s, p in tmpfs_mounts() if s == self.tag]
        _remove(nss, lnks, mounts)

    def __enter__(self) -> Net:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
