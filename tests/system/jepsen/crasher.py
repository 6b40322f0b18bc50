"""A transactional producer the `producer` nemesis kills mid-transaction.

`python -m tests.system.jepsen.crasher BOOTSTRAP TOPIC PARTITION TXN_ID FIRST COUNT`:
begins a transaction, sends COUNT values FIRST.. to TOPIC-PARTITION, flushes (so the records
are in the partition's log), prints "sent" and waits to be killed, never committing.
`--abort` instead only runs InitProducerId for TXN_ID: the open transaction of the crashed
producer is aborted once that returns (Kafka's fencing), and prints "aborted".
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Producer


def main(argv: list[str]) -> int:
    abort = "--abort" in argv
    args = [a for a in argv if a != "--abort"]
    bootstrap, topic, partition, txn_id, first, count = args
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "enable.idempotence": True, "acks": "all",
                         "transaction.timeout.ms": 600000})
    producer.init_transactions(120)
    if abort:
        print("aborted", flush=True)
        return 0
    producer.begin_transaction()
    for v in range(int(first), int(first) + int(count)):
        producer.produce(topic, str(v).encode(), str(v).encode(), partition=int(partition))
    if producer.flush(120) != 0:
        print("unflushed", flush=True)
        return 1
    print("sent", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
