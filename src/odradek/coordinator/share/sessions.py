"""Share sessions (KIP-932's ShareSessionCache), sans-I/O: the partitions a member fetches
from this node, and the epoch of its next request.

A ShareFetch with epoch 0 opens a session with the partitions it names (acknowledgements
are not allowed there: nothing has been acquired in it yet); later requests carry the next
epoch (1, 2, ... wrapping back to 1), add partitions and forget others; epoch -1 closes the
session, and the records its member holds are released. ShareAcknowledge uses the session
and moves its epoch as well, but cannot open one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.protocol.errors import ErrorCode

E = ErrorCode
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1
TopicIdPartition = tuple[uuid.UUID, int]


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    next_epoch: int = 1
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)  # ordered set


class SessionError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _next(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def fetch(self, group_id: str, member_id: str, epoch: int,
              added: Iterable[TopicIdPartition], forgotten: Iterable[TopicIdPartition],
              has_acks: bool) -> tuple[ShareSession, bool]:
        """Check a ShareFetch's epoch against its session and apply its partitions;
        (session, whether this request closes it). Raises SessionError, and then changes
        nothing."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if has_acks:
                raise SessionError(E.invalid_request,
                                   "Acknowledge data present on initial fetch request")
            if key not in self.sessions and len(self.sessions) >= self.max_sessions:
                raise SessionError(E.share_session_limit_reached,
                                   "The limit of share sessions has been reached")
            session = self.sessions[key] = ShareSession(group_id, member_id)
            session.partitions.update(dict.fromkeys(added))
            return session, False
        session = self._check(key, epoch)
        if epoch == FINAL_EPOCH:
            del self.sessions[key]
            return session, True
        for tp in forgotten:
            session.partitions.pop(tp, None)
        session.partitions.update(dict.fromkeys(added))
        session.next_epoch = _next(epoch)
        return session, False

    def acknowledge(self, group_id: str, member_id: str,
                    epoch: int) -> tuple[ShareSession, bool]:
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            raise SessionError(E.invalid_share_session_epoch,
                               "A ShareAcknowledge cannot open a share session")
        session = self._check(key, epoch)
        if epoch == FINAL_EPOCH:
            del self.sessions[key]
            return session, True
        session.next_epoch = _next(epoch)
        return session, False

    def _check(self, key: tuple[str, str], epoch: int) -> ShareSession:
        session = self.sessions.get(key)
        if session is None:
            raise SessionError(E.share_session_not_found,
                               f"Share session for member {key[1]} not found")
        if epoch != FINAL_EPOCH and epoch != session.next_epoch:
            raise SessionError(E.invalid_share_session_epoch,
                               f"Share session epoch {epoch} is not the expected "
                               f"{session.next_epoch}")
        return session

    def drop_member(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)
