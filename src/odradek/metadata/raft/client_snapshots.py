"""The follower's and the leader's halves of FetchSnapshot (KIP-630), a mixin of `RaftClient`:
a follower whose next offset is below the leader's log start downloads the leader's latest
snapshot in chunks, then fetches on from its end."""

from __future__ import annotations

from typing import Any

from odradek.metadata.raft import messages as m
from odradek.metadata.raft.state import Follower, Leader

__all__ = ["SnapshotFetching"]


class SnapshotFetching:
    # provided by RaftClient
    quorum: Any
    log: Any
    config: Any
    high_watermark: int
    snapshots_installed: int
    leader_id: Any
    _reply: Any
    _observe: Any
    _send_fetch: Any

    def _on_fetch_snapshot_request(
        self, msg: m.Message, req: m.FetchSnapshotRequest, now: int
    ) -> None:
        st = self.quorum.state

        def answer(error: int, **kw: object) -> None:
            self._reply(msg, m.FetchSnapshotResponse(
                error, st.epoch, self.leader_id, req.snapshot_id, **kw))  # type: ignore[arg-type]

        if req.current_leader_epoch < st.epoch:
            answer(m.FENCED_LEADER_EPOCH)
        elif req.current_leader_epoch > st.epoch:
            answer(m.UNKNOWN_LEADER_EPOCH)
        elif not isinstance(st, Leader):
            answer(m.NOT_LEADER_OR_FOLLOWER)
        else:
            chunk = self.log.read_snapshot(req.snapshot_id, req.position, req.max_bytes)
            if chunk is None:
                answer(m.SNAPSHOT_NOT_FOUND)
            elif req.position < 0 or req.position > chunk[1]:
                answer(m.POSITION_OUT_OF_RANGE)
            else:
                answer(m.NONE, size=chunk[1], position=req.position, data=chunk[0])

    def _on_fetch_snapshot_response(
        self, msg: m.Message, resp: m.FetchSnapshotResponse, now: int
    ) -> None:
        self._observe(resp.leader_epoch, resp.leader_id, now)
        st = self.quorum.state
        if (
            not isinstance(st, Follower)
            or st.inflight != msg.correlation_id
            or msg.src != st.leader_id
            or st.snapshot is None
        ):
            return
        st.inflight = None
        sid, position = st.snapshot  # type: ignore[misc]
        if resp.error != m.NONE or resp.snapshot_id != sid or resp.position != position:
            st.snapshot = None  # start over from a Fetch: the leader may hold a newer one
            st.next_fetch_at = now + self.config.retry_backoff_ms
            return
        st.fetch_deadline = now + self.config.fetch_timeout_ms
        st.fetched_ok = True
        if self.log.write_snapshot_chunk(sid, position, resp.data, resp.size):
            st.snapshot = None
            self.high_watermark = max(self.high_watermark, sid.end_offset)
            self.snapshots_installed += 1
            st.next_fetch_at = now
            return
        if not resp.data:
            st.snapshot = None
            st.next_fetch_at = now + self.config.retry_backoff_ms
            return
        st.snapshot = (sid, position + len(resp.data))
        self._send_fetch(st, now)
