"""AlterUserScramCredentials (51) v0 and DescribeUserScramCredentials (50) v0.

Alter: each upsertion carries salt and SaltedPassword (the admin client salts and hashes;
the password never travels), derived here into StoredKey/ServerKey and committed by the
controller as UserScramCredentialRecords (forwarded to the active controller in a cluster).
Describe: answered from the node's metadata image: mechanisms and iterations, never keys.
Authorized as Kafka does: Describe on the cluster to list (else the answer's top-level
CLUSTER_AUTHORIZATION_FAILED), Alter on the cluster to change (else that code for each user).
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.handlers.common import Response, decode, respond
from odradek.broker.handlers.controller_apis import _run
from odradek.metadata.acls import AclOperation
from odradek.metadata.controller_scram import describe_user_scram_credentials
from odradek.metadata.records import UserScramCredentialRecord
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.sasl.scram import mechanism_name
from odradek.security.scram_credentials import record_from_salted

# Kafka's ClusterAuthorizationException message
DENIED = "Cluster authorization failed."

VERSIONS = (ApiVersionRange(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0),
            ApiVersionRange(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0))


def handle_describe(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    if not authz.cluster_allowed(ctx, header, AclOperation.DESCRIBE):
        # Kafka's error response: the code at the top and once per user asked for (unnamed)
        return respond(header, {"throttle_time": 0,
                                "error_code": ErrorCode.cluster_authorization_failed,
                                "error_message": DENIED, "results": [
                                    {"user": "", "error_code":
                                     ErrorCode.cluster_authorization_failed,
                                     "error_message": DENIED, "credential_infos": []}
                                    for _ in req.users or ()]})
    users = None if not req.users else [u.name for u in req.users]
    results = describe_user_scram_credentials(ctx.image, users)
    return respond(header, {"throttle_time": 0, "error_code": ErrorCode.none,
                            "error_message": None, "results": [
                                {"user": user, "error_code": code, "error_message": message,
                                 "credential_infos": [{"mechanism": m, "iterations": i}
                                                      for m, i in infos]}
                                for user, code, message, infos in results]})


def handle_alter(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    if not authz.cluster_allowed(ctx, header, AclOperation.ALTER):
        users = dict.fromkeys([*(d.name for d in req.deletions), *(u.name for u in req.upsertions)])
        return respond(header, {"throttle_time": 0, "results": [
            {"user": user, "error_code": ErrorCode.cluster_authorization_failed,
             "error_message": DENIED} for user in users]})
    deletions = [(d.name, int(d.mechanism)) for d in req.deletions]
    upsertions: list[UserScramCredentialRecord] = []
    for u in req.upsertions:
        name = mechanism_name(int(u.mechanism))
        if name is None:  # the controller answers UNSUPPORTED_SASL_MECHANISM for it
            upsertions.append(UserScramCredentialRecord(u.name, int(u.mechanism), b"", b"",
                                                        b"", int(u.iterations)))
            continue
        upsertions.append(record_from_salted(u.name, name, bytes(u.salt),
                                             bytes(u.salted_password), int(u.iterations)))
    return _alter(ctx, header, deletions, upsertions)


async def _alter(ctx: Any, header: Any, deletions: list[tuple[str, int]],
                 upsertions: list[UserScramCredentialRecord]) -> Response:
    try:
        results = await _run(ctx, "alter_user_scram_credentials", deletions, upsertions)
    except KafkaError as exc:
        users = dict.fromkeys([*(u for u, _ in deletions), *(u.name for u in upsertions)])
        results = [(u, exc.code, exc.message or None) for u in users]
    return respond(header, {"throttle_time": 0, "results": [
        {"user": user, "error_code": code, "error_message": message}
        for user, code, message in results]})
