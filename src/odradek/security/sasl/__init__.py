"""SASL server mechanisms, sans-I/O: each is fed the client's token and answers the next
server token, until it has a principal or raises SaslFailure. PLAIN and SCRAM-SHA-256/512
(RFC 5802/7677) check the SCRAM credentials of the metadata image; OAUTHBEARER (RFC 7628)
checks a JWT's signature against configured keys."""

from odradek.security.sasl.mechanism import SaslFailure, SaslMechanism

__all__ = ["SaslFailure", "SaslMechanism"]
