"""Jepsen-style fault testing (issue 15): a history of client operations, workloads that
fill it through real Kafka clients, faults that break the cluster underneath them, and a
checker that reads the whole history afterwards and names every anomaly it finds.

See `history.py` for the history format shared by the harness, the workloads and the checker.
"""
