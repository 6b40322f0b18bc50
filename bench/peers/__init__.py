"""The systems the side-by-side benchmark (`python -m bench.compare`) drives: odradek itself and
the peers a user could run instead, each started on loopback and stopped by the harness."""
