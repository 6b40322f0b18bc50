"""One partition's next state: Kafka's PartitionChangeBuilder, as a pure function.

Given a partition, a target ISR / replica set and an election type, `partition_change` picks
the leader and returns the PartitionChangeRecord that gets there (None when nothing changes).
The rules are Kafka's (KRaft, before eligible leader replicas):
- an ONLINE election keeps an acceptable leader that stays in the ISR; otherwise the first
  replica (in replica order, so the preferred one first) that is in the ISR and acceptable;
- a PREFERRED election moves leadership to the first replica when it is in the ISR and
  acceptable, and otherwise changes nothing;
- with no acceptable ISR member the partition has no leader (-1), unless unclean election is
  allowed: then the first acceptable replica leads, the ISR is just it and the leader recovery
  state is RECOVERING (the caller logs the possible data loss);
- the ISR is never emptied: removing its last member leaves it as it was (the leader, if that
  member led, becomes -1 as it is no longer acceptable), except when that member is back
  from an unclean shutdown (`unclean_shutdown`, KIP-966): its disk may have lost records
  the ISR acknowledged, so it may not lead again from the ISR: the ISR is left empty and
  the partition has no leader until an unclean election;
- an ongoing reassignment completes once every target replica is in the ISR (those it adds
  and those it keeps): the replicas become the target, removing replicas leave the ISR, and
  the leader epoch is bumped.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from odradek.metadata.image import PartitionImage
from odradek.metadata.records import PartitionChangeRecord

__all__ = ["RECOVERED", "RECOVERING", "Election", "PartitionChange", "partition_change"]

NO_LEADER = -1
RECOVERED = 0
RECOVERING = 1


class Election(IntEnum):
    """Kafka's ElectionType ids (PREFERRED 0, UNCLEAN 1) plus the controller's own ONLINE."""

    PREFERRED = 0
    UNCLEAN = 1
    ONLINE = 2


@dataclass
class PartitionChange:
    record: PartitionChangeRecord | None
    leader: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    unclean: bool = False  # an out-of-sync replica was made leader


def partition_change(
    part: PartitionImage,
    topic_id: uuid.UUID,
    acceptable: Callable[[int], bool],
    *,
    target_isr: Sequence[int] | None = None,
    target_replicas: Sequence[int] | None = None,
    adding: Sequence[int] | None = None,
    removing: Sequence[int] | None = None,
    election: Election = Election.ONLINE,
    unclean_allowed: bool = False,
    recovery_state: int | None = None,
    unclean_shutdown: Sequence[int] = (),
) -> PartitionChange:
    replicas = tuple(part.replicas if target_replicas is None else target_replicas)
    isr = tuple(part.isr if target_isr is None else target_isr)
    if not isr and not any(r in part.isr for r in unclean_shutdown):
        isr = part.isr  # never empty the ISR: the last member stays
    add = tuple(part.adding_replicas if adding is None else adding)
    rem = tuple(part.removing_replicas if removing is None else removing)
    bump = False
    # a reassignment completes once every target replica is in the ISR (Kafka's
    # PartitionReassignmentReplicas.maybeCompleteReassignment): not only the adding ones, so
    # removing an in-sync replica never leaves a target replica that is behind as the only
    # other copy (docs/reliability.md, finding 12)
    if add or rem:
        final = tuple(r for r in replicas if r not in rem)
        final_isr = tuple(r for r in isr if r not in rem)
        if final and final_isr and all(r in final_isr for r in final):
            replicas, isr, add, rem, bump = final, final_isr, (), (), True
    if any(r not in replicas for r in isr):
        isr = tuple(r for r in isr if r in replicas) or isr
    leader = part.leader
    recovery = part.leader_recovery_state if recovery_state is None else recovery_state
    unclean = False
    current_ok = leader in isr and leader in replicas and acceptable(leader)
    if election == Election.PREFERRED:
        preferred = replicas[0] if replicas else NO_LEADER
        if preferred != leader and preferred in isr and acceptable(preferred):
            leader = preferred
        elif not current_ok:
            leader = _first_in_isr(replicas, isr, acceptable)
    elif not current_ok:
        leader = _first_in_isr(replicas, isr, acceptable)
        if leader == NO_LEADER and (unclean_allowed or election == Election.UNCLEAN):
            leader = next((r for r in replicas if acceptable(r)), NO_LEADER)
            if leader != NO_LEADER:
                isr, recovery, unclean = (leader,), RECOVERING, True
    record = PartitionChangeRecord(part.partition, topic_id)
    changed = False
    if isr != part.isr:
        record.isr, changed = list(isr), True
    if leader != part.leader or (bump and leader != NO_LEADER):
        # the same leader written again bumps the leader epoch (a reassignment removed
        # replicas: they must stop fetching)
        record.leader, changed = leader, True
    if replicas != part.replicas:
        record.replicas, changed = list(replicas), True
    if add != part.adding_replicas:
        record.adding_replicas, changed = list(add), True
    if rem != part.removing_replicas:
        record.removing_replicas, changed = list(rem), True
    if recovery != part.leader_recovery_state:
        record.leader_recovery_state, changed = recovery, True
    return PartitionChange(record if changed else None, leader, isr, replicas, unclean)


def _first_in_isr(replicas: Sequence[int], isr: Sequence[int],
                  acceptable: Callable[[int], bool]) -> int:
    return next((r for r in replicas if r in isr and acceptable(r)), NO_LEADER)
