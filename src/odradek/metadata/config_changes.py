"""What an AlterConfigs or IncrementalAlterConfigs resource changes: the new value (None: the
override goes) of each config whose override moves, validated against the resource's current
overrides in the image. Pure: the controller writes the result as ConfigRecords."""

from __future__ import annotations

from typing import Any

from odradek.metadata.config.broker_configs import (
    BROKER_CONFIGS,
    BrokerConfig,
    validate_broker_dynamic_configs,
)
from odradek.metadata.config.config_def import ConfigType, parse_value
from odradek.metadata.config.group_configs import (
    GROUP_CONFIGS,
    validate_group_configs,
    validate_group_name,
)
from odradek.metadata.config.topic_configs import TOPIC_CONFIGS, validate_topic_configs
from odradek.metadata.controller_requests import (
    AlterConfigsResource,
    AlterOp,
    IncrementalAlterConfigsResource,
)
from odradek.metadata.image import MetadataImage
from odradek.metadata.records import RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC
from odradek.protocol.errors import ErrorCode, KafkaError

__all__ = ["incremental_changes", "replacement_changes"]


def replacement_changes(
    image: MetadataImage, broker_config: BrokerConfig, res: AlterConfigsResource
) -> dict[str, str | None]:
    """Legacy AlterConfigs: the given configs replace every override of the resource."""
    current = _current_configs(image, res.resource_type, res.resource_name)
    pairs = list(res.configs.items()) if isinstance(res.configs, dict) else list(res.configs)
    new = dict(pairs)
    if len(new) != len(pairs):
        raise KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    _validate_configs(res.resource_type, new, current, broker_config)
    changes: dict[str, str | None] = {k: None for k in current if k not in new}
    changes.update({k: v for k, v in new.items() if current.get(k) != v})
    return changes

def incremental_changes(
    image: MetadataImage, broker_config: BrokerConfig, res: IncrementalAlterConfigsResource
) -> dict[str, str | None]:
    """IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT applied to the overrides."""
    current = _current_configs(image, res.resource_type, res.resource_name)
    names = [name for name, _, _ in res.ops]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    new: dict[str, str | None] = dict(current)
    for name, op, value in res.ops:
        if op not in AlterOp.__members__.values():
            raise KafkaError(ErrorCode.invalid_request, f"Unknown operation type {op}")
        op = AlterOp(op)
        if op is AlterOp.SET:
            new[name] = value
        elif op is AlterOp.DELETE:
            new.pop(name, None)
        else:
            defn = _TABLES.get(res.resource_type, BROKER_CONFIGS).get(name)
            if defn is None or defn.type is not ConfigType.LIST:
                raise KafkaError(
                    ErrorCode.invalid_config,
                    f"Can't {op.name} to key {name} because its type is not LIST.",
                )
            items = _current_list(broker_config, res.resource_type, name, new.get(name))
            given = [v.strip() for v in (value or "").split(",") if v.strip()]
            if op is AlterOp.APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            new[name] = ",".join(items)
    _validate_configs(res.resource_type, new, current, broker_config)
    changes: dict[str, str | None] = {k: None for k in current if k not in new}
    changes.update({k: v for k, v in new.items() if current.get(k) != v})
    return changes

_TABLES = {RESOURCE_TOPIC: TOPIC_CONFIGS, RESOURCE_GROUP: GROUP_CONFIGS}

def _current_list(
    broker_config: BrokerConfig, resource_type: int, name: str, override: str | None
) -> list[str]:
    if override is not None:
        value: Any = parse_value(name, ConfigType.LIST, override)
    elif resource_type == RESOURCE_TOPIC:
        value = broker_config.topic_default(name)[0]
    else:
        value = broker_config.get(name)
    return list(value or [])

def _current_configs(image: MetadataImage, resource_type: int, resource_name: str) -> dict[str, str]:
    if resource_type == RESOURCE_TOPIC:
        if resource_name not in image.topics_by_name:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
        return dict(image.topic_configs(resource_name))
    if resource_type == RESOURCE_BROKER:
        if resource_name != "":
            try:
                int(resource_name)
            except ValueError:
                raise KafkaError(
                    ErrorCode.invalid_request, f"Illegal broker id: {resource_name}"
                ) from None
        return dict(image.broker_configs(resource_name))
    if resource_type == RESOURCE_GROUP:
        # a group need not exist to have configs (Kafka keeps them apart from its state)
        validate_group_name(resource_name)
        return dict(image.configs.get((RESOURCE_GROUP, resource_name), {}))
    raise KafkaError(ErrorCode.invalid_request, f"Unexpected resource type {resource_type}")

def _validate_configs(
    resource_type: int, new: dict[str, str | None], current: dict[str, str],
    broker_config: BrokerConfig,
) -> None:
    if resource_type == RESOURCE_TOPIC:
        validate_topic_configs(new)
    elif resource_type == RESOURCE_GROUP:
        validate_group_configs(new, broker_config.get)
    else:
        validate_broker_dynamic_configs({k: v for k, v in new.items() if current.get(k) != v})
