"""bench.c_consume_ab's helpers: the partitions per Fetch read from librdkafka's `debug=fetch`
log, the mean round trip over every statistics window (bench.consume_ab's, both A/B tools
use it), and the PYTHONPATH a `before` node starts with (restored afterwards)."""

import os

from bench.c_consume_ab import command, fetch_partitions, python_path
from bench.consume_ab import mean_rtt_ms

# lines as librdkafka 2.16 logs them (rd_kafka_broker_fetch_toppars), with others between
_LOG = """\
%7|1764284000.123|FETCH|rdkafka#consumer-1| [thrd:127.0.0.1:9092/1]: 127.0.0.1:9092/1: \
Fetch 6/6/6 toppar(s)
%7|1764284000.124|FETCHDEC|rdkafka#consumer-1| [thrd:127.0.0.1:9092/1]: Topic t [0] in state \
active at offset 0 (0/100000 msgs, 0/65536 kb queued, opv 2) is fetchable
%7|1764284000.160|FETCH|rdkafka#consumer-1| [thrd:127.0.0.1:9092/1]: 127.0.0.1:9092/1: \
Fetch 6/6/6 toppar(s)
%7|1764284000.170|FETCH|rdkafka#consumer-1| [thrd:127.0.0.1:9092/1]: 127.0.0.1:9092/1: \
Fetch 2/6/6 toppar(s)
%7|1764284000.180|FETCH|rdkafka#consumer-1| [thrd:127.0.0.1:9092/1]: 127.0.0.1:9092/1: \
Fetch 0/0/6 toppar(s)
"""


def test_fetch_partitions_counts_the_fetches_sent() -> None:
    # a "Fetch 0/..." line sends nothing (every partition backed off): not a Fetch
    assert fetch_partitions(_LOG) == "3 Fetches, 4.67 partitions each (2: 1, 6: 2)"
    assert fetch_partitions("") == "0 Fetches, 0.00 partitions each ()"


def test_python_path_is_set_for_the_node_and_restored() -> None:
    before = os.environ.get("PYTHONPATH")
    with python_path("/tmp/other-src"):
        assert os.environ["PYTHONPATH"] == "/tmp/other-src"
    assert os.environ.get("PYTHONPATH") == before
    with python_path(None):
        assert os.environ.get("PYTHONPATH") == before


def _sample(rtts_us: list[int]) -> dict[str, object]:
    # a statistics sample: the bootstrap entry (nodeid -1) and the broker, whose rtt window
    # holds this interval's round trips only
    broker = {"nodeid": 1, "rtt": {"avg": sum(rtts_us) // max(len(rtts_us), 1),
                                   "sum": sum(rtts_us), "cnt": len(rtts_us)}}
    boot = {"nodeid": -1, "rtt": {"avg": 0, "sum": 0, "cnt": 0}}
    return {"brokers": {"boot": boot, "b1": broker}}


def test_mean_rtt_counts_every_window_not_the_last() -> None:
    samples = [_sample([1000, 3000]), _sample([]), _sample([8000])]
    assert mean_rtt_ms(samples) == 4.0  # (1 + 3 + 8) ms / 3, where the last window says 8
    assert mean_rtt_ms([]) == 0.0


def test_command_turns_entry_keys_into_the_tool_options(tmp_path) -> None:
    # librdkafka keys go to -X; tool, cpus (taskset), pin (-C) and env.* are not settings
    cmd, env = command("127.0.0.1:9092", "t", 100,
                       {"fetch.queue.backoff.ms": 5, "tool": "/x/consume", "cpus": "0:1",
                        "pin": "0:1", "env.GLIBC_TUNABLES": "glibc.malloc.arena_max=1"},
                       tmp_path / "s", perf_stat=tmp_path / "p")
    assert env == {"GLIBC_TUNABLES": "glibc.malloc.arena_max=1"}
    assert cmd[:3] == ["taskset", "-c", "0,1"]
    assert cmd[3:5] == ["perf", "stat"]
    tool = cmd.index("/x/consume")
    assert cmd[tool + 1:tool + 11] == ["-b", "127.0.0.1:9092", "-t", "t", "-n", "100", "-T",
                                       "30", "-s", str(tmp_path / "s")]
    assert cmd[tool + 11:tool + 13] == ["-C", "0:1"]
    assert cmd[tool + 13:] == ["-X", "fetch.queue.backoff.ms=5", "-X",
                               "statistics.interval.ms=100"]
    plain, _ = command("h:1", "t", 1, {"tool": "/x/c"}, tmp_path / "s", debug=True)
    assert plain[0] == "/x/c" and "-C" not in plain and plain[-1] == "debug=fetch"
