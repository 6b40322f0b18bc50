"""DescribeCluster (DescribeLogDirs: log_dirs.py)."""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.handlers import admin
from odradek.broker.handlers.common import Response, decode, respond
from odradek.metadata.acls import AclOperation, ResourceType
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode

NO_AUTHORIZED_OPS = -2147483648
BROKERS_ENDPOINT = 1


VERSIONS = (
    ApiVersionRange(ApiKey.DESCRIBE_CLUSTER, 0, 2),  # v2: include_fenced_brokers (KIP-1073)
)


def handle_describe_cluster(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    endpoint_type = int(getattr(req, "endpoint_type", BROKERS_ENDPOINT))
    cluster_ops = NO_AUTHORIZED_OPS
    # Kafka: asked for, and the principal may describe the cluster
    if (getattr(req, "include_cluster_authorized_operations", False)
            and authz.cluster_allowed(ctx, header, AclOperation.DESCRIBE)):
        cluster_ops = authz.authorized_operations(ctx, header, ResourceType.CLUSTER,
                                                  "kafka-cluster")
    if endpoint_type != BROKERS_ENDPOINT:
        return respond(header, {
            "throttle_time": 0, "error_code": ErrorCode.unsupported_endpoint_type,
            "error_message": "this node serves broker endpoints only",
            "endpoint_type": endpoint_type, "cluster_id": ctx.cluster_id, "controller_id": -1,
            "brokers": (), "cluster_authorized_operations": NO_AUTHORIZED_OPS})
    if getattr(req, "include_fenced_brokers", False):
        brokers = [{"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                    "is_fenced": b.fenced} for b in admin.all_brokers(ctx)]
    else:
        brokers = [{"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                    "is_fenced": False} for b in admin.live_brokers(ctx)]
    return respond(header, {
        "throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
        "endpoint_type": endpoint_type, "cluster_id": ctx.cluster_id,
        "controller_id": ctx.controller_id, "brokers": brokers,
        "cluster_authorized_operations": cluster_ops})
