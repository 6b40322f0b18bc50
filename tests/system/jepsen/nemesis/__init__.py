"""Fault families (one module each) and the runner that plays a seeded schedule.

Each family is a `base.Nemesis`: `start(fault)` makes it and says what it did, `stop` heals
it, `heal_all` undoes anything left. `runner.NemesisRunner` plays a `schedule.plan` against a
`base.Context`, writing each start and heal to the history with `History.nemesis`.
"""

from __future__ import annotations

from tests.system.jepsen.nemesis.base import Context, Nemesis
from tests.system.jepsen.nemesis.clock import ClockNemesis
from tests.system.jepsen.nemesis.disk import DiskNemesis, FsyncNemesis
from tests.system.jepsen.nemesis.membership import ReassignNemesis
from tests.system.jepsen.nemesis.network import PartitionNemesis
from tests.system.jepsen.nemesis.process import CrashNemesis, KillNemesis, PauseNemesis
from tests.system.jepsen.nemesis.producer import ProducerCrashNemesis
from tests.system.jepsen.nemesis.proxy_faults import ProxyNemesis

__all__ = ["NEMESES", "Context", "Nemesis"]

NEMESES: dict[str, type[Nemesis]] = {n.family: n for n in (
    KillNemesis, PauseNemesis, PartitionNemesis, ProxyNemesis, ClockNemesis, DiskNemesis,
    FsyncNemesis, CrashNemesis, ReassignNemesis, ProducerCrashNemesis)}
