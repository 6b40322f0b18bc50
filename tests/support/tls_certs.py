"""A throwaway certificate authority for TLS tests: a CA, a server certificate for
localhost/127.0.0.1 and client certificates, written as PEM (and PKCS12) into a temp dir."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID


def _name(cn: str, org: str = "odradek-tests", unit: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
             x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)]
    if unit:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


@dataclass
class Issued:
    cert: Path  # PEM certificate
    key: Path  # PEM private key (unencrypted, or with `password`)
    bundle: Path  # key + certificate in one PEM file (a PEM key store)
    p12: Path  # PKCS12 store with `password`
    password: str


class CertAuthority:
    def __init__(self, directory: Path, cn: str = "odradek test CA") -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.name = _name(cn)
        self.cert = (x509.CertificateBuilder().subject_name(self.name).issuer_name(self.name)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(days=1))
                     .not_valid_after(now + datetime.timedelta(days=30))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
                     .sign(self.key, hashes.SHA256()))
        self.ca_pem = self.dir / "ca.pem"
        self.ca_pem.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, cn: str, *, server: bool = False, unit: str | None = None,
              password: str = "store-secret", key_password: str | None = None) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (x509.CertificateBuilder().subject_name(_name(cn, unit=unit))
                   .issuer_name(self.name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=30)))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                False)
        cert = builder.sign(self.key, hashes.SHA256())
        enc = (serialization.BestAvailableEncryption(key_password.encode()) if key_password
               else serialization.NoEncryption())
        key_pem = key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8, enc)
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        base = self.dir / cn.replace(" ", "_")
        paths = Issued(Path(f"{base}.crt"), Path(f"{base}.key"), Path(f"{base}-bundle.pem"),
                       Path(f"{base}.p12"), password)
        paths.cert.write_bytes(cert_pem)
        paths.key.write_bytes(key_pem)
        paths.bundle.write_bytes(key_pem + cert_pem)
        paths.p12.write_bytes(pkcs12.serialize_key_and_certificates(
            cn.encode(), key, cert, [self.cert],
            serialization.BestAvailableEncryption(password.encode())))
        return paths
