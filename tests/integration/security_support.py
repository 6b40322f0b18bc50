"""A node with every kind of listener for the security tests: PLAINTEXT, MTLS (SSL with
ssl.client.auth=required), SASL_SSL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER) and
SASL_PLAINTEXT, formatted with SCRAM users as kafka-storage.sh does."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.broker import ODRADEK, BrokerProcess, free_port
from tests.support.jwt_tokens import JwtIssuer
from tests.support.tls_certs import CertAuthority, Issued

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
MECHANISMS = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]
REAUTH_MS = 4000


@dataclass
class SecuredNode:
    node: BrokerProcess
    ca: CertAuthority
    client: Issued  # a client certificate the CA signed (CN=alice-client)
    issuer: JwtIssuer
    ports: dict[str, int] = field(default_factory=dict)

    def addr(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def sasl_ssl(self, mechanism: str, user: str = "admin",
                 password: str | None = None) -> dict[str, str]:
        """confluent-kafka settings for the SASL_SSL listener."""
        return {"bootstrap.servers": self.addr("SASL_SSL"), "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(self.ca.ca_pem), "sasl.mechanism": mechanism,
                "sasl.username": user,
                "sasl.password": USERS.get(user, "x") if password is None else password}

    def mtls(self) -> dict[str, str]:
        return {"bootstrap.servers": self.addr("MTLS"), "security.protocol": "SSL",
                "ssl.ca.location": str(self.ca.ca_pem),
                "ssl.certificate.location": str(self.client.cert),
                "ssl.key.location": str(self.client.key)}


def settings_for(tmp: Path, ports: dict[str, int], ca: CertAuthority, server: Issued,
                 issuer: JwtIssuer) -> dict[str, str]:
    return {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,MTLS:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        # the key store as PKCS12 node-wide, PEM for the MTLS listener (both kinds served)
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(server.p12),
        "ssl.keystore.password": server.password,
        "listener.name.mtls.ssl.keystore.type": "PEM",
        "listener.name.mtls.ssl.keystore.location": str(server.bundle),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": str(ca.ca_pem),
        "listener.name.mtls.ssl.principal.mapping.rules":
            "RULE:^CN=(.*?),OU=.*$/$1/L,DEFAULT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "sasl.oauthbearer.jwks.endpoint.url": f"file://{issuer.jwks}",
        "sasl.oauthbearer.expected.issuer": issuer.issuer,
        "sasl.oauthbearer.expected.audience": "kafka",
        "sasl.oauthbearer.clock.skew.seconds": "0",
        # KIP-368 on one listener: its sessions must re-authenticate every 4 s
        "listener.name.sasl_plaintext.connections.max.reauth.ms": str(REAUTH_MS),
    }


def start_secured(tmp: Path, extra: dict[str, str] | None = None) -> SecuredNode:
    """`extra` settings go on top (an authorizer, say) for tests that need more."""
    ca = CertAuthority(tmp / "ca")
    server = ca.issue("localhost", server=True)
    client = ca.issue("alice-client", unit="Engineering")
    issuer = JwtIssuer(tmp)
    ports = {name: free_port() for name in ("PLAINTEXT", "MTLS", "SASL_SSL", "SASL_PLAINTEXT")}
    settings = {**settings_for(tmp, ports, ca, server, issuer), **(extra or {})}
    data = tmp / "data"
    sets = [arg for k, v in settings.items() for arg in ("--set", f"{k}={v}")]
    scram = [arg for user, pw in USERS.items() for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512")
             for arg in ("--add-scram", f"{mech}=[name={user},password={pw}]")]
    cluster_id = subprocess.run([*ODRADEK, "storage", "random-uuid"], capture_output=True,
                                text=True, check=True).stdout.strip()
    done = subprocess.run([*ODRADEK, "storage", "format", "-t", cluster_id, "--data-dir",
                           str(data), *sets, *scram], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    node = BrokerProcess(data, port=ports["PLAINTEXT"], settings=settings)
    node.start(timeout=120)  # a loaded machine: waiting is not asserting
    return SecuredNode(node, ca, client, issuer, ports)
