"""Valid requests built with kio's entities, for tests that speak raw Kafka to a node."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.create_topics.v4 import request as ct4
from kio.schema.create_topics.v5 import request as ct5
from kio.schema.metadata.v1 import request as md1
from kio.schema.metadata.v9 import request as md9
from kio.schema.produce.v3 import request as p3
from kio.schema.produce.v7 import request as p7
from kio.schema.produce.v9 import request as p9
from kio.static.primitive import i16, i32

TIMEOUT = datetime.timedelta(seconds=10)


def api_versions_v0() -> Any:
    return ApiVersionsV0()


def api_versions_v3() -> Any:
    return ApiVersionsV3(client_software_name="odradek-tests", client_software_version="1.0")


def metadata_v1(topics: list[str] | None) -> Any:
    return md1.MetadataRequest(
        topics=None if topics is None else tuple(md1.MetadataRequestTopic(name=t) for t in topics))


def metadata_v9(topics: list[str] | None, auto_create: bool = True) -> Any:
    return md9.MetadataRequest(
        topics=None if topics is None else tuple(md9.MetadataRequestTopic(name=t) for t in topics),
        allow_auto_topic_creation=auto_create, include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False)


def produce(version: int, topic: str, partition: int, records: bytes, acks: int = 1) -> Any:
    mod = {3: p3, 7: p7, 9: p9}[version]
    return mod.ProduceRequest(
        transactional_id=None, acks=i16(acks), timeout=TIMEOUT,
        topic_data=(mod.TopicProduceData(name=topic, partition_data=(
            mod.PartitionProduceData(index=i32(partition), records=records),)),))


def create_topics(version: int, names: list[str], partitions: int = 1) -> Any:
    mod = {4: ct4, 5: ct5}[version]
    return mod.CreateTopicsRequest(
        topics=tuple(mod.CreatableTopic(name=n, num_partitions=i32(partitions),
                                        replication_factor=i16(1), assignments=(), configs=())
                     for n in names),
        timeout=TIMEOUT, validate_only=False)
