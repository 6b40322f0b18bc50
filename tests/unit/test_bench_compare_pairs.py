"""bench.compare's ratio columns: the C consumer's rows are compared only with the peer read by
the same C client and library; every other pair stays."""

from bench.compare import OURS, SYSTEM_NAMES, ratio_pairs


def test_c_consumer_rows_pair_with_the_same_client_only() -> None:
    peers = [s for s in SYSTEM_NAMES if s not in OURS]
    pairs = ratio_pairs(list(OURS), peers)
    assert ("odradek-rdkafka-c-2.16", "tansu-rdkafka-c-2.16") in pairs
    assert ("odradek", "tansu") in pairs and ("odradek-columnar", "redis") in pairs
    # Debian's 2.0.2 C consumer has no peer (it cannot talk to Tansu); nothing else meets a C peer
    assert not [p for p in pairs if p[0] == "odradek-rdkafka-c"]
    assert [p for p in pairs if p[1] == "tansu-rdkafka-c-2.16"] == [
        ("odradek-rdkafka-c-2.16", "tansu-rdkafka-c-2.16")]
