"""Issue 17, point 2: two registry processes over one node agree. One is elected the writer
(the member of the registry group holding `_schemas`' partition); a write sent to the other is
forwarded to it, and the follower answers reads after its write from an up-to-date view."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.test_registry_api import USER_V1, USER_V2, running_registry
from tests.support.broker import BrokerProcess


def test_two_registries_agree_and_follower_forwards(broker: BrokerProcess,
                                                     tmp_path: Path) -> None:
    with running_registry(broker.bootstrap, tmp_path, "one") as one, \
            running_registry(broker.bootstrap, tmp_path, "two") as two:
        # Writes alternate between the instances; whichever is the follower forwards.
        a = one.call("POST", "/subjects/s/versions", {"schema": USER_V1})
        b = two.call("POST", "/subjects/s/versions", {"schema": USER_V2})
        assert a[0] == 200 and b[0] == 200, (a, b)
        # Read-your-writes on the instance that took the write, whichever one led.
        assert two.call("GET", "/subjects/s/versions") == (200, [1, 2])
        other = json.dumps({"type": "record", "name": "O", "fields": []})
        c = two.call("POST", "/subjects/t/versions", {"schema": other})
        d = one.call("POST", "/subjects/u/versions", {"schema": USER_V1})
        assert c[0] == 200 and d == (200, {"id": a[1]["id"]})  # same schema, same id
        assert len({a[1]["id"], b[1]["id"], c[1]["id"]}) == 3
        for reg in (one, two):
            assert reg.call("GET", "/subjects/t/versions/1")[1]["id"] == c[1]["id"]
            assert reg.call("GET", "/subjects") == (200, ["s", "t", "u"])
        forwarded = "is a follower" in one.log() + two.log()
        assert forwarded and "is the leader" in one.log() + two.log()
        # A refused write is refused the same way through a follower.
        bad = json.dumps({"type": "record", "name": "test.User",
                          "fields": [{"name": "name", "type": "int"}]})
        for reg in (one, two):
            status, body = reg.call("POST", "/subjects/s/versions", {"schema": bad})
            assert (status, body["error_code"]) == (409, 409)
        # The first instance stops (and leaves the group): the other one takes the writes.
        one.stop()
        assert one.proc is not None and one.proc.returncode == 0, one.log()
        late = json.dumps({"type": "record", "name": "L", "fields": []})
        status, body = two.call("POST", "/subjects/late/versions", {"schema": late})
        assert status == 200 and body["id"] > max(a[1]["id"], b[1]["id"], c[1]["id"]), body


def test_ineligible_instance_forwards_every_write(broker: BrokerProcess, tmp_path: Path) -> None:
    from tests.integration.test_registry_api import RegistryProcess

    with running_registry(broker.bootstrap, tmp_path, "leader") as leader:
        follower = RegistryProcess(broker.bootstrap, tmp_path / "follower.log")
        follower.extra_args = ["--no-leader-eligibility"]
        follower.start()
        try:
            status, body = follower.call("POST", "/subjects/f/versions", {"schema": USER_V1})
            assert status == 200, body
            assert follower.call("GET", "/subjects/f/versions") == (200, [1])
            assert leader.call("GET", "/subjects/f/versions/1")[1]["id"] == body["id"]
        finally:
            follower.stop()
