"""bench.compare's ratio columns: the C clients' rows are compared only with the peer driven by
the same C programs and library; every other pair stays. The table of issue 23's rows for a
pair, and the best peer of the issue-3 target under the same client."""

from bench.compare import OURS, SYSTEM_NAMES, pair_table, ratio_pairs, targets
from bench.rows import aggregate


def test_c_consumer_rows_pair_with_the_same_client_only() -> None:
    peers = [s for s in SYSTEM_NAMES if s not in OURS]
    pairs = ratio_pairs(list(OURS), peers)
    assert ("odradek-rdkafka-c-2.16", "tansu-rdkafka-c-2.16") in pairs
    assert ("odradek", "tansu") in pairs and ("odradek-columnar", "redis") in pairs
    # Debian's 2.0.2 C consumer has no peer (it cannot talk to Tansu); nothing else meets a C peer
    assert not [p for p in pairs if p[0] == "odradek-rdkafka-c"]
    assert [p for p in pairs if p[1] == "tansu-rdkafka-c-2.16"] == [
        ("odradek-rdkafka-c-2.16", "tansu-rdkafka-c-2.16")]


def _rows() -> list[dict[str, object]]:
    """Two runs of the C pair, every row of issue 23, with odradek at twice Tansu's rate and
    half its node CPU per GB, and a Python-client peer faster than both."""
    rows: list[dict[str, object]] = []
    for run in (1, 2):
        for system, speed, cpu in (("odradek-rdkafka-c-2.16", 2.0 * run, 0.5),
                                   ("tansu-rdkafka-c-2.16", 1.0 * run, 1.0),
                                   ("redis", 10.0, 1.0)):
            for workload in ("produce", "consume"):
                for size in (100, 1024):
                    rate = speed * 1_000_000 / (1 if size == 100 else 10)
                    rows.append({"system": system, "workload": workload, "run": run,
                                 "size": size, "partitions": 6, "records_per_sec": rate,
                                 "mb_per_sec": rate * size / 1024 / 1024,
                                 "cpu_s_per_gb": cpu * run})
    return rows


def test_pair_table_has_issue_23_rows_in_its_order_with_per_run_ratios() -> None:
    table = pair_table(_rows(), "odradek-rdkafka-c-2.16", "tansu-rdkafka-c-2.16", 6)
    labels = [line.split(" | ")[0].lstrip("| ") for line in table[4:]]
    assert labels == ["produce 100 B, records/s", "produce 1 KB, GB/s", "consume 1 KB, GB/s",
                      "node CPU s/GB, produce 100 B", "node CPU s/GB, produce 1 KB",
                      "node CPU s/GB, consume 100 B", "node CPU s/GB, consume 1 KB",
                      "consume 100 B, records/s"]
    cells = {line.split(" | ")[0].lstrip("| "): line.strip("| ").split(" | ")[1:]
             for line in table[4:]}
    # medians (min-max) over the two runs; GB/s from MiB/s
    assert cells["produce 100 B, records/s"] == ["3,000,000 (2,000,000-4,000,000)",
                                                 "1,500,000 (1,000,000-2,000,000)", "2.00x"]
    assert cells["produce 1 KB, GB/s"][2] == "2.00x"
    assert cells["produce 1 KB, GB/s"][0].startswith("0.31 (0.20-0.41)")
    assert cells["node CPU s/GB, consume 1 KB"] == ["0.75 (0.50-1.00)", "1.50 (1.00-2.00)",
                                                    "0.50x"]


def test_c_rows_meet_only_the_peer_driven_by_the_same_c_programs() -> None:
    rows = _rows()
    out = targets(aggregate(rows), rows, ["tansu-rdkafka-c-2.16", "redis"],
                  ["odradek-rdkafka-c-2.16"])
    ratio = next(line for line in out if line.startswith("| produce 100 B >= 2.5x"))
    # against Tansu under the same C producer (2x), not against redis' faster client
    assert ratio.endswith("| 2.00x (no) |")
