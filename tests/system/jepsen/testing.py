"""One namespaced cluster shared by the short seeded runs of `make test`
(tests/system/test_jepsen_<family>.py), made with everything any family needs: the proxy in
front of clients, tmpfs data dirs, skewclock, frequent fsyncs. Starting it once keeps the
families' runs to seconds each; every run writes to topics of its own and heals the cluster
before it ends, so runs do not see each other's values.
"""

from __future__ import annotations

import atexit
import contextlib
import tempfile
import threading
from pathlib import Path

from tests.system.jepsen.cluster import JepsenCluster, jepsen_cluster
from tests.system.jepsen.proxy import Proxy
from tests.system.jepsen.run import RunResult, cluster_options, play
from tests.system.jepsen.schedule import FAMILIES

__all__ = ["short_run"]

_lock = threading.Lock()
_shared: tuple[JepsenCluster, Proxy, Path] | None = None
_stack = contextlib.ExitStack()


def _cluster() -> tuple[JepsenCluster, Proxy, Path]:
    global _shared
    with _lock:
        if _shared is None:
            root = Path(tempfile.mkdtemp(prefix="jepsen-short-"))
            opts = cluster_options(list(FAMILIES), root)
            opts.pop("proxy")
            proxy = Proxy(0)
            _stack.callback(proxy.close)
            cluster = _stack.enter_context(jepsen_cluster(root / "cluster", proxy=proxy, **opts))
            atexit.register(_stack.close)
            _shared = (cluster, proxy, root)
        return _shared


def short_run(family: str, seed: int, workloads: list[str], length: float = 8.0) -> RunResult:
    """A short seeded run of one family on the shared cluster; its files under the
    cluster's temporary directory (the path is in the result)."""
    cluster, proxy, root = _cluster()
    topic = f"j-{family}-{seed}"
    return play(cluster, proxy, seed, [family], workloads, length, root / topic,
                topics=[topic], short=True)
