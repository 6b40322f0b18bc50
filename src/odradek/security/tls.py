"""TLS for a listener: the server ssl.SSLContext from Kafka's ssl.* configs, and the
principal of a client certificate.

Key stores: PEM (a file with the private key and its certificate chain, or the key and the
chain given inline in ssl.keystore.key / ssl.keystore.certificate.chain) and PKCS12 (read
with `cryptography`, handed to the ssl module as PEM through a private temporary file that
is removed at once: the ssl module loads keys from files only). JKS is refused: there is no
Java key store reader here, and serving without the configured key would be a silent change.

Every value may be set per listener as `listener.name.<listener>.<key>` (Kafka's override).
A setting the ssl module cannot honour (a TLS 1.3 cipher-suite subset, an unknown protocol
name, a gap in the enabled protocols) is refused with its key named.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator
from typing import Any

from odradek.security.principal_rules import PrincipalMapper

__all__ = ["PrincipalMapper", "TlsConfigError", "client_context", "listener_value", "peer_dn",
           "server_context"]

_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_ORDER = ["TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"]
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}


class TlsConfigError(ValueError):
    """An ssl.* setting a listener cannot be served with (the message names the key)."""


def listener_value(config: Any, listener: str, key: str) -> Any:
    """`listener.name.<listener>.<key>` when set, else the node-wide key (typed, with
    Kafka's default)."""
    override = config.values.get(f"listener.name.{listener.lower()}.{key}")
    if override is not None:
        return override
    return config.get(key)


def _str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def _list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [v.strip() for v in value if v.strip()]
    return [v.strip() for v in str(value).split(",") if v.strip()]


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    """A file only this process can read, removed when the block ends."""
    fd, path = tempfile.mkstemp(prefix="odradek-tls-", suffix=".pem")
    try:
        os.write(fd, data)
        os.close(fd)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _read(path: str, key: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise TlsConfigError(f"{key}={path}: cannot read it ({exc.strerror or exc})") from None


def _load_keystore(ctx: ssl.SSLContext, get: Any) -> None:
    kind = (_str(get("ssl.keystore.type")) or "JKS").upper()
    location = _str(get("ssl.keystore.location"))
    inline_key = _str(get("ssl.keystore.key"))
    if inline_key:
        chain = _str(get("ssl.keystore.certificate.chain"))
        if not chain:
            raise TlsConfigError("ssl.keystore.key is set without ssl.keystore.certificate.chain")
        with _private_file((inline_key.strip() + "\n" + chain.strip() + "\n").encode()) as path:
            _load_chain(ctx, path, _str(get("ssl.key.password")), "ssl.keystore.key")
        return
    if not location:
        raise TlsConfigError("a TLS listener needs ssl.keystore.location (or ssl.keystore.key "
                             "and ssl.keystore.certificate.chain)")
    if kind == "PEM":
        _load_chain(ctx, location, _str(get("ssl.key.password")), "ssl.keystore.location")
    elif kind == "PKCS12":
        pem = pkcs12_to_pem(_read(location, "ssl.keystore.location"),
                            _str(get("ssl.keystore.password")), "ssl.keystore.location")
        with _private_file(pem) as path:
            _load_chain(ctx, path, None, "ssl.keystore.location")
    else:
        raise TlsConfigError(f"ssl.keystore.type={kind} is not supported: use PEM or PKCS12 "
                             "(odradek reads no Java key stores)")


def _load_chain(ctx: ssl.SSLContext, path: str, password: str | None, key: str) -> None:
    try:
        ctx.load_cert_chain(path, password=password)
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(f"{key}: the private key and certificate chain cannot be loaded "
                             f"({exc}); a PEM key store holds the key (encrypted with "
                             "ssl.key.password, or not) and the certificates") from None


def pkcs12_to_pem(data: bytes, password: str | None, key: str) -> bytes:
    """A PKCS12 store -> PEM bytes: its key (unencrypted, for a private temp file) and its
    certificates, the key's own first."""
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        pkcs12,
    )

    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as exc:
        raise TlsConfigError(f"{key}: not a PKCS12 store this password opens ({exc})") from None
    out = b""
    if store.key is not None:
        out += store.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    if store.cert is not None:
        out += store.cert.certificate.public_bytes(Encoding.PEM)
    for extra in store.additional_certs:
        out += extra.certificate.public_bytes(Encoding.PEM)
    return out


def _load_truststore(ctx: ssl.SSLContext, get: Any) -> bool:
    """Load the trusted certificates; False when none are configured."""
    inline = _str(get("ssl.truststore.certificates"))
    if inline:
        try:
            ctx.load_verify_locations(cadata=inline)
        except ssl.SSLError as exc:
            raise TlsConfigError(f"ssl.truststore.certificates: not PEM certificates ({exc})"
                                 ) from None
        return True
    location = _str(get("ssl.truststore.location"))
    if not location:
        return False
    kind = (_str(get("ssl.truststore.type")) or "JKS").upper()
    if kind == "PEM":
        data = _read(location, "ssl.truststore.location").decode("ascii", "replace")
    elif kind == "PKCS12":
        data = pkcs12_to_pem(_read(location, "ssl.truststore.location"),
                             _str(get("ssl.truststore.password")),
                             "ssl.truststore.location").decode()
    else:
        raise TlsConfigError(f"ssl.truststore.type={kind} is not supported: use PEM or PKCS12 "
                             "(odradek reads no Java key stores)")
    try:
        ctx.load_verify_locations(cadata=data)
    except ssl.SSLError as exc:
        raise TlsConfigError(f"ssl.truststore.location={location}: no certificates in it "
                             f"({exc})") from None
    return True


def _protocols(ctx: ssl.SSLContext, names: list[str]) -> None:
    unknown = [n for n in names if n not in _VERSIONS]
    if unknown:
        raise TlsConfigError(f"ssl.enabled.protocols: {', '.join(unknown)} not known "
                             f"(one of {', '.join(_ORDER)})")
    if not names:
        raise TlsConfigError("ssl.enabled.protocols is empty")
    idx = sorted(_ORDER.index(n) for n in set(names))
    if idx[-1] - idx[0] + 1 != len(idx):
        raise TlsConfigError(f"ssl.enabled.protocols={','.join(names)}: the ssl module serves a "
                             "range of versions, not a set with a gap")
    try:
        ctx.minimum_version = _VERSIONS[_ORDER[idx[0]]]
        ctx.maximum_version = _VERSIONS[_ORDER[idx[-1]]]
    except (ValueError, ssl.SSLError) as exc:
        raise TlsConfigError(f"ssl.enabled.protocols: {exc}") from None


def _ciphers(ctx: ssl.SSLContext, suites: list[str], protocols: list[str]) -> None:
    if not suites:
        return
    tls13 = {c["name"] for c in ctx.get_ciphers() if c.get("protocol") == "TLSv1.3"}
    named13 = {s for s in suites if s in tls13}
    older = [s for s in suites if s not in tls13]
    if "TLSv1.3" in protocols and named13 != tls13:
        raise TlsConfigError(
            f"ssl.cipher.suites: with TLSv1.3 enabled the list must name every TLS 1.3 suite "
            f"({', '.join(sorted(tls13))}): the ssl module cannot serve a subset of them")
    if older:
        try:
            ctx.set_ciphers(":".join(older))
        except ssl.SSLError:
            raise TlsConfigError(f"ssl.cipher.suites: none of {', '.join(older)} is a cipher "
                                 "suite OpenSSL knows (use OpenSSL names, e.g. "
                                 "ECDHE-RSA-AES128-GCM-SHA256)") from None
        served = {c["name"] for c in ctx.get_ciphers()}
        missing = [s for s in older if s not in served]
        if missing:
            raise TlsConfigError(f"ssl.cipher.suites: {', '.join(missing)} not known to OpenSSL")


def server_context(config: Any, listener: str) -> ssl.SSLContext:
    """The TLS context of `listener` (SSL or SASL_SSL)."""

    def get(key: str) -> Any:
        return listener_value(config, listener, key)

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    protocols = _list(get("ssl.enabled.protocols"))
    _protocols(ctx, protocols)
    _ciphers(ctx, _list(get("ssl.cipher.suites")), protocols)
    _load_keystore(ctx, get)
    auth = (_str(get("ssl.client.auth")) or "none").strip().lower()
    if auth not in _CLIENT_AUTH:
        raise TlsConfigError(f"ssl.client.auth={auth}: one of none, requested, required")
    ctx.verify_mode = _CLIENT_AUTH[auth]
    if auth != "none" and not _load_truststore(ctx, get):
        raise TlsConfigError(f"ssl.client.auth={auth} needs ssl.truststore.location (or "
                             "ssl.truststore.certificates): the CAs client certificates are "
                             "checked against")
    # no resumption tickets: each connection proves its certificate again
    ctx.options |= ssl.OP_NO_TICKET
    return ctx


def client_context(config: Any, listener: str) -> ssl.SSLContext:
    """The TLS context this node connects to a peer's `listener` with (inter-broker or
    controller), from that listener's ssl.* settings as Kafka's node clients take them: the
    trust store checks the peer's certificate (none configured: the system's CAs), the key
    store is this node's own certificate (sent when the peer asks, as under
    ssl.client.auth=required), ssl.endpoint.identification.algorithm=https checks the
    peer's host name against it (empty: not)."""

    def get(key: str) -> Any:
        return listener_value(config, listener, key)

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    protocols = _list(get("ssl.enabled.protocols"))
    _protocols(ctx, protocols)
    _ciphers(ctx, _list(get("ssl.cipher.suites")), protocols)
    if not _load_truststore(ctx, get):
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if _str(get("ssl.keystore.location")) or _str(get("ssl.keystore.key")):
        _load_keystore(ctx, get)
    algorithm = (_str(get("ssl.endpoint.identification.algorithm")) or "").strip().lower()
    if algorithm not in ("https", ""):
        raise TlsConfigError(f"ssl.endpoint.identification.algorithm={algorithm}: https or "
                             "empty (no host name check)")
    ctx.check_hostname = algorithm == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def peer_dn(transport: Any) -> str | None:
    """The client certificate's subject as RFC 2253 text (Java's X500Principal.getName()
    order: the last RDN first), or None without a certificate."""
    obj = transport.get_extra_info("ssl_object")
    if obj is None:
        return None
    der = obj.getpeercert(binary_form=True)
    if not der:
        return None
    from cryptography import x509

    return x509.load_der_x509_certificate(der).subject.rfc4514_string()
