"""What security costs a node: produce and consume over PLAINTEXT, SSL and SASL_SSL side by
side, TLS and SCRAM connection setup, and SASL authentications per second.

    python -m bench.security_cost [--records 50000] [--record-size 1000] [--connections 40]
                                  [--auth-seconds 5]

One node with all three listeners (tests.integration.security_support's, formatted with
SCRAM users). For each protocol a confluent-kafka producer writes --records records to its
own topic and a consumer (assigned, no group) reads them back; the node's CPU seconds
(psutil) per GB moved are reported with the client's throughput. Setup: --connections
sequential connections from this process, each to its first ApiVersions answer (plaintext,
TLS) or to a completed SCRAM-SHA-512 authentication (TLS + SASL). Authentications/s: as
many PLAIN and SCRAM-SHA-512 authentications over SASL_PLAINTEXT as two client threads
complete in --auth-seconds, with the node's CPU per authentication (PLAIN makes the node
run PBKDF2 over the stored credential's 4096 iterations; SCRAM puts that work on the client).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import os
import socket
import ssl
import statistics
import struct
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka import Consumer, Producer, TopicPartition
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from tests.integration.security_support import USERS, SecuredNode, start_secured
from tests.support import requests as rq
from tests.support import wire

GB = 1e9


def _cpu(ps: psutil.Process) -> float:
    t = ps.cpu_times()
    return t.user + t.system


def _conf(s: SecuredNode, protocol: str) -> dict[str, Any]:
    if protocol == "PLAINTEXT":
        return {"bootstrap.servers": s.addr("PLAINTEXT")}
    if protocol == "SSL":
        return s.mtls()
    return s.sasl_ssl("SCRAM-SHA-512")


def throughput(s: SecuredNode, protocol: str, records: int, size: int) -> dict[str, float]:
    ps = psutil.Process(s.node.proc.pid)  # type: ignore[union-attr]
    topic = f"bench-{protocol.lower()}"
    conf = _conf(s, protocol)
    producer = Producer({**conf, "linger.ms": 5, "batch.size": 1_000_000,
                         "compression.type": "none", "acks": 1})
    value = os.urandom(size)
    producer.produce(topic, value)  # the topic exists before the clock starts
    producer.flush(60)
    cpu0, t0 = _cpu(ps), time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    t1, cpu1 = time.perf_counter(), _cpu(ps)
    consumer = Consumer({**conf, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 52_428_800})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    cpu2, t2 = _cpu(ps), time.perf_counter()
    while got < records + 1:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                got += 1
    t3, cpu3 = time.perf_counter(), _cpu(ps)
    consumer.close()
    nbytes = records * size
    return {"produce_mb_s": nbytes / 1e6 / (t1 - t0), "produce_cpu_s_per_gb": (cpu1 - cpu0)
            / (nbytes / GB), "consume_mb_s": nbytes / 1e6 / (t3 - t2),
            "consume_cpu_s_per_gb": (cpu3 - cpu2) / (nbytes / GB)}


class _Raw:
    """One blocking connection speaking Kafka frames (optionally over TLS)."""

    def __init__(self, port: int, ctx: ssl.SSLContext | None) -> None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = ctx.wrap_socket(sock, server_hostname="localhost") if ctx else sock
        self.cid = 0

    def request(self, req: Any) -> Any:
        self.cid += 1
        self.sock.sendall(wire.frame(wire.request_payload(req, self.cid)))
        head = self._exact(4)
        payload = self._exact(struct.unpack(">i", head)[0])
        from kio.serial import entity_reader

        cls = wire.response_class(req)
        _, used = entity_reader(cls.__header_schema__)(payload, 0)
        return entity_reader(cls)(payload, used)[0]

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()


def scram_login(conn: _Raw, user: str, password: str) -> None:
    """RFC 5802 client, SCRAM-SHA-512."""
    nonce = base64.b64encode(os.urandom(18)).decode()
    bare = f"n={user},r={nonce}"
    assert conn.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512")).error_code == 0
    first = conn.request(SaslAuthenticateRequest(auth_bytes=f"n,,{bare}".encode()))
    attrs = dict(a.split("=", 1) for a in bytes(first.auth_bytes).decode().split(","))
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    client_key = hmac.digest(salted, b"Client Key", "sha512")
    without = f"c=biws,r={attrs['r']}"
    auth = f"{bare},{bytes(first.auth_bytes).decode()},{without}".encode()
    sig = hmac.digest(hashlib.sha512(client_key).digest(), auth, "sha512")
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig, strict=True)))
    final = conn.request(SaslAuthenticateRequest(auth_bytes=f"{without},p=".encode() + proof))
    assert final.error_code == 0, final.error_message


def setup_times(s: SecuredNode, n: int) -> dict[str, float]:
    ctx = ssl.create_default_context(cafile=str(s.ca.ca_pem))
    mctx = ssl.create_default_context(cafile=str(s.ca.ca_pem))
    mctx.load_cert_chain(str(s.client.cert), str(s.client.key))
    kinds = {
        "plaintext + ApiVersions": lambda: _Raw(s.ports["PLAINTEXT"], None),
        "TLS (mTLS) + ApiVersions": lambda: _Raw(s.ports["MTLS"], mctx),
        "TLS + SCRAM-SHA-512": lambda: _Raw(s.ports["SASL_SSL"], ctx),
    }
    out = {}
    for name, make in kinds.items():
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            conn = make()
            if "SCRAM" in name:
                scram_login(conn, "admin", USERS["admin"])
            else:
                conn.request(rq.api_versions_v3())
            times.append(time.perf_counter() - t0)
            conn.close()
        out[name] = statistics.median(times) * 1000
    return out


def auth_rate(s: SecuredNode, mechanism: str, seconds: float) -> tuple[float, float]:
    ps = psutil.Process(s.node.proc.pid)  # type: ignore[union-attr]
    done = [0, 0]
    stop = time.perf_counter() + seconds

    def worker(i: int) -> None:
        while time.perf_counter() < stop:
            conn = _Raw(s.ports["SASL_PLAINTEXT"], None)
            if mechanism == "PLAIN":
                assert conn.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
                ok = conn.request(SaslAuthenticateRequest(
                    auth_bytes=f"\0admin\0{USERS['admin']}".encode()))
                assert ok.error_code == 0
            else:
                scram_login(conn, "admin", USERS["admin"])
            conn.close()
            done[i] += 1

    cpu0, t0 = _cpu(ps), time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed, cpu = time.perf_counter() - t0, _cpu(ps) - cpu0
    total = sum(done)
    return total / elapsed, cpu / total * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--record-size", type=int, default=1000)
    parser.add_argument("--connections", type=int, default=40)
    parser.add_argument("--auth-seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="odradek-secbench-") as tmp:
        s = start_secured(Path(tmp))
        try:
            print("| protocol | produce MB/s | node CPU s/GB (produce) | consume MB/s | "
                  "node CPU s/GB (consume) |\n|---|---|---|---|---|")
            for proto in ("PLAINTEXT", "SSL", "SASL_SSL"):
                r = throughput(s, proto, args.records, args.record_size)
                print(f"| {proto} | {r['produce_mb_s']:.1f} | {r['produce_cpu_s_per_gb']:.2f} | "
                      f"{r['consume_mb_s']:.1f} | {r['consume_cpu_s_per_gb']:.2f} |", flush=True)
            print(f"\n| connection setup (median of {args.connections}) | ms |\n|---|---|")
            for name, median_ms in setup_times(s, args.connections).items():
                print(f"| {name} | {median_ms:.1f} |", flush=True)
            print("\n| authentications (2 client threads, SASL_PLAINTEXT) | per s | "
                  "node CPU ms each |\n|---|---|---|")
            for mech in ("PLAIN", "SCRAM-SHA-512"):
                rate, cpu_ms = auth_rate(s, mech, args.auth_seconds)
                print(f"| {mech} | {rate:.0f} | {cpu_ms:.2f} |", flush=True)
        finally:
            s.node.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
