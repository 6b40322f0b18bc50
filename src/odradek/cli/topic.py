"""`odradek topic ...`: create, list, describe, alter-config, add-partitions, delete."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from odradek.cli.common import (
    BootstrapOption,
    ClientConfigOption,
    CommandConfigOption,
    TimeoutOption,
    describe_error,
    fail,
    kafka_error_name,
    kafka_errors,
    result,
    usage,
)
from odradek.cli.common import admin as connect_admin
from odradek.cli.table import FormatOption, check_format, emit

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient, ConfigEntry

app = typer.Typer(help="Create, inspect, change and delete topics.", no_args_is_help=True)


def _admin(bootstrap: str, client_config: list[str] | None = None,
           command_config: Path | None = None) -> AdminClient:
    return connect_admin(bootstrap, client_config, command_config)


def _configs(pairs: list[str], what: str) -> dict[str, str]:
    from odradek.client.config import parse_key_values

    try:
        return parse_key_values(pairs, what)
    except ValueError as exc:
        fail(str(exc), code=2)


@app.command()
def create(
    name: str = typer.Argument(..., help="Topic name."),
    partitions: int | None = typer.Option(
        None, "-p", "--partitions", metavar="N", show_default=False,
        help="Partition count, at least 1 (default: the node's num.partitions)."),
    replication_factor: int | None = typer.Option(
        None, "-r", "--replication-factor", metavar="N", show_default=False,
        help="Replicas per partition, at least 1 (default: the node's "
             "default.replication.factor)."),
    config: list[str] = typer.Option(
        [], "-c", "--config", metavar="KEY=VALUE",
        help="A topic config (repeatable); the keys: `odradek config list --topic`."),
    if_not_exists: bool = typer.Option(False, "--if-not-exists",
                                       help="Succeed when the topic already exists."),
    validate_only: bool = typer.Option(False, "--validate-only",
                                       help="Let the cluster check the request without creating."),
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    timeout: float = TimeoutOption,
) -> None:
    """Create a topic."""
    from confluent_kafka.admin import NewTopic

    # Checked here, in Kafka's words, rather than left to librdkafka's argument checks.
    if partitions is not None and partitions < 1:
        usage(f"--partitions must be at least 1, not {partitions}")
    if replication_factor is not None and replication_factor < 1:
        usage(f"--replication-factor must be at least 1, not {replication_factor}")
    topic = NewTopic(name, num_partitions=-1 if partitions is None else partitions,
                     replication_factor=-1 if replication_factor is None else replication_factor,
                     config=_configs(config, "topic config"))
    with kafka_errors():
        admin = _admin(bootstrap, client_config, command_config)  # kept alive until the futures resolve
        futures = admin.create_topics([topic], operation_timeout=timeout,
                                                  request_timeout=timeout,
                                                  validate_only=validate_only)
        try:
            result(futures[name], timeout)
        except typer.Exit:
            raise
        except Exception as exc:
            if if_not_exists and _error_name(exc) == "TOPIC_ALREADY_EXISTS":
                print(f"Topic {name} already exists.")
                return
            raise
    print(f"{'Validated' if validate_only else 'Created'} topic {name}.")


def _error_name(exc: BaseException) -> str | None:
    from confluent_kafka import KafkaError

    err = exc.args[0] if exc.args else None
    return kafka_error_name(err) if isinstance(err, KafkaError) else None


@app.command("list")
def list_(
    exclude_internal: bool = typer.Option(False, "--exclude-internal",
                                          help="Leave out internal topics (names starting __)."),
    fmt: str = FormatOption,
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    timeout: float = TimeoutOption,
) -> None:
    """List topics with their partition count and replicas per partition."""
    check_format(fmt)
    with kafka_errors():
        metadata = _admin(bootstrap, client_config, command_config).list_topics(timeout=timeout)
    rows = []
    for name in sorted(metadata.topics):
        if exclude_internal and name.startswith("__"):
            continue
        parts = metadata.topics[name].partitions
        replicas = len(next(iter(parts.values())).replicas) if parts else 0
        rows.append([name, len(parts), replicas])
    emit(["NAME", "PARTITIONS", "REPLICAS"], rows, fmt)


@app.command()
def describe(
    names: list[str] = typer.Argument(None, metavar="[TOPIC]...", show_default=False,
                                      help="Topics (default: all)."),
    configs: bool = typer.Option(False, "--configs",
                                 help="Show every config with its value and source."),
    offsets: bool = typer.Option(False, "--offsets",
                                 help="Show each partition's high watermark and last stable "
                                      "offset (the LSO is shown anyway where it lags)."),
    under_replicated: bool = typer.Option(
        False, "--under-replicated-partitions",
        help="Only partitions whose ISR is smaller than their replicas."),
    unavailable: bool = typer.Option(
        False, "--unavailable-partitions", help="Only partitions without a leader (offline)."),
    fmt: str = FormatOption,
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    timeout: float = TimeoutOption,
) -> None:
    """Partitions with leader, replicas and ISR, like kafka-topics --describe, then the
    count of offline and under-replicated partitions."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import ConfigResource, ResourceType

    check_format(fmt)
    described: list[dict[str, Any]] = []
    health = Health()
    with kafka_errors():
        admin = _admin(bootstrap, client_config, command_config)
        if not names:
            names = sorted(n for n in admin.list_topics(timeout=timeout).topics)
        if not names:
            return
        descriptions = admin.describe_topics(TopicCollection(names), request_timeout=timeout)
        resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
        config_futures = admin.describe_configs(resources, request_timeout=timeout)
        failed = False
        for name, resource in zip(names, resources, strict=True):
            try:
                desc = result(descriptions[name], timeout)
                entries = result(config_futures[resource], timeout)
            except typer.Exit:
                raise
            except Exception as exc:
                print(f"Error: topic {name}: {describe_error(exc)}", file=sys.stderr)
                failed = True
                continue
            health.add(desc)
            if fmt == "json":
                described.append(description_json(admin, desc, entries, configs, offsets,
                                                  timeout))
                continue
            text = render_description(desc, entries, all_configs=configs,
                                      only=partition_filter(under_replicated, unavailable))
            print(with_stable_offsets(admin, desc, text, offsets, timeout))
    if fmt == "json":
        print(json.dumps(described, indent=2))
    else:
        print(health.line())
    if failed:
        raise typer.Exit(1)


def _node_id(node: Any) -> str:
    return "none" if node is None or node.id < 0 else str(node.id)


def _ids(nodes: list[Any]) -> str:
    return ",".join(str(n.id) for n in nodes)


def kafka_uuid(uuid: Any) -> str:
    """Kafka prints topic ids as URL-safe base64 without padding; librdkafka's str() does not."""
    if uuid is None:
        return "none"
    msb = uuid.get_most_significant_bits() & (2**64 - 1)
    lsb = uuid.get_least_significant_bits() & (2**64 - 1)
    raw = msb.to_bytes(8, "big") + lsb.to_bytes(8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def is_offline(p: Any) -> bool:
    return p.leader is None or p.leader.id < 0


def is_under_replicated(p: Any) -> bool:
    return len(p.isr) < len(p.replicas)


def partition_filter(under_replicated: bool, unavailable: bool) -> Any:
    """kafka-topics' --under-replicated-partitions / --unavailable-partitions (either)."""
    if not (under_replicated or unavailable):
        return None
    return lambda p: ((under_replicated and is_under_replicated(p))
                      or (unavailable and is_offline(p)))


class Health:
    """Counts over the described topics: offline (no leader) and under-replicated."""

    def __init__(self) -> None:
        self.partitions = self.offline = self.under_replicated = 0

    def add(self, desc: Any) -> None:
        for p in desc.partitions:
            self.partitions += 1
            self.offline += is_offline(p)
            self.under_replicated += is_under_replicated(p)

    def line(self) -> str:
        return (f"Partitions: {self.partitions}\tOffline: {self.offline}"
                f"\tUnderReplicated: {self.under_replicated}")


def render_description(desc: Any, entries: dict[str, ConfigEntry], all_configs: bool = False,
                       only: Any = None) -> str:
    from confluent_kafka.admin import ConfigSource

    partitions = sorted(desc.partitions, key=lambda p: p.id)
    rf = len(partitions[0].replicas) if partitions else 0
    # kafka-topics shows a topic's own overrides on the first line, not the defaults.
    overrides = sorted((e for e in entries.values()
                        if _source_name(e.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG.name),
                       key=lambda e: e.name)
    shown = ",".join(f"{e.name}={'<sensitive>' if e.is_sensitive else e.value}" for e in overrides)
    lines = [f"Topic: {desc.name}\tTopicId: {kafka_uuid(desc.topic_id)}\tPartitionCount: {len(partitions)}"
             f"\tReplicationFactor: {rf}\tConfigs: {shown}"]
    for p in partitions:
        if only is not None and not only(p):
            continue
        lines.append(f"\tTopic: {desc.name}\tPartition: {p.id}\tLeader: {_node_id(p.leader)}"
                     f"\tReplicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}")
    if all_configs:
        lines.append("\tConfigs:")
        for entry in sorted(entries.values(), key=lambda e: e.name):
            value = "<sensitive>" if entry.is_sensitive else entry.value
            lines.append(f"\t\t{entry.name}={'' if value is None else value}"
                         f"\t({_source_name(entry.source)})")
    return "\n".join(lines)


def _marks(admin: AdminClient, desc: Any, timeout: float) -> dict[int, tuple[int, int]]:
    """partition -> (high watermark, last stable offset); empty when the node does not say."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    tps = [TopicPartition(desc.name, p.id) for p in desc.partitions]
    if not tps:
        return {}
    spec = {tp: OffsetSpec.latest() for tp in tps}
    try:
        hws = admin.list_offsets(spec, request_timeout=timeout)
        lsos = admin.list_offsets(spec, isolation_level=IsolationLevel.READ_COMMITTED,
                                  request_timeout=timeout)
        return {tp.partition: (result(hws[tp], timeout).offset,
                               result(lsos[tp], timeout).offset) for tp in tps}
    except Exception:
        return {}


def description_json(admin: AdminClient, desc: Any, entries: dict[str, ConfigEntry],
                     all_configs: bool, offsets: bool, timeout: float) -> dict[str, Any]:
    """What `describe` prints, as one JSON object per topic."""
    marks = _marks(admin, desc, timeout) if offsets else {}
    partitions = []
    for p in sorted(desc.partitions, key=lambda p: p.id):
        row: dict[str, Any] = {
            "partition": p.id, "leader": None if p.leader is None or p.leader.id < 0
            else p.leader.id, "replicas": [n.id for n in p.replicas],
            "isr": [n.id for n in p.isr], "offline": is_offline(p),
            "under_replicated": is_under_replicated(p)}
        if offsets:
            hw, lso = marks.get(p.id, (None, None))
            row.update(high_watermark=hw, last_stable_offset=lso)
        partitions.append(row)
    configs = {e.name: None if e.is_sensitive else e.value for e in entries.values()
               if all_configs or _source_name(e.source) == "DYNAMIC_TOPIC_CONFIG"}
    return {"topic": desc.name, "topic_id": kafka_uuid(desc.topic_id),
            "partition_count": len(partitions),
            "replication_factor": len(desc.partitions[0].replicas) if desc.partitions else 0,
            "configs": dict(sorted(configs.items())), "partitions": partitions,
            "offline": sum(p["offline"] for p in partitions),
            "under_replicated": sum(p["under_replicated"] for p in partitions)}


def with_stable_offsets(admin: AdminClient, desc: Any, text: str, always: bool,
                        timeout: float) -> str:
    """Append HighWatermark/LastStableOffset to the partition lines (issue 6): on every
    line with `always`, else only where open transactions hold the LSO below the HW."""
    marks = _marks(admin, desc, timeout)
    if not marks:
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not line.startswith("\tTopic: ") or "\tPartition: " not in line:
            continue
        p = int(line.split("\tPartition: ")[1].split("\t")[0])
        hw, lso = marks.get(p, (-1, -1))
        if always:
            lines[i] = f"{line}\tHighWatermark: {hw}\tLastStableOffset: {lso}"
        elif lso != hw:
            lines[i] = f"{line}\tLastStableOffset: {lso}"
    return "\n".join(lines)


def _source_name(source: Any) -> str:
    from confluent_kafka.admin import ConfigSource

    if isinstance(source, ConfigSource):
        return source.name
    try:
        return ConfigSource(source).name
    except ValueError:
        return str(source)


@app.command("alter-config")
def alter_config(
    name: str = typer.Argument(..., help="Topic name."),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE",
                                   help="Set a topic config (repeatable)."),
    delete: list[str] = typer.Option([], "--delete", metavar="KEY",
                                     help="Remove an override, back to the default (repeatable)."),
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    timeout: float = TimeoutOption,
) -> None:
    """Change topic configs (IncrementalAlterConfigs)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    if not set_ and not delete:
        fail("nothing to change: give --set key=value and/or --delete key", code=2)
    ops = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
           for k, v in _configs(set_, "config").items()]
    ops += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=ops)
    with kafka_errors():
        admin = _admin(bootstrap, client_config, command_config)  # kept alive until the futures resolve
        futures = admin.incremental_alter_configs([resource], request_timeout=timeout)
        result(futures[resource], timeout)
    print(f"Completed updating config for topic {name}.")


@app.command("add-partitions")
def add_partitions(
    name: str = typer.Argument(..., help="Topic name."),
    partitions: int = typer.Option(..., "-p", "--partitions", metavar="N",
                                   help="The new total partition count."),
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    timeout: float = TimeoutOption,
) -> None:
    """Raise a topic's partition count to a new total."""
    from confluent_kafka.admin import NewPartitions

    if partitions < 1:
        usage(f"--partitions must be at least 1, not {partitions}")
    with kafka_errors():
        admin = _admin(bootstrap, client_config, command_config)  # kept alive until the futures resolve
        futures = admin.create_partitions([NewPartitions(name, partitions)],
                                                      operation_timeout=timeout,
                                                      request_timeout=timeout)
        result(futures[name], timeout)
    print(f"Topic {name} now has {partitions} partitions.")


@app.command()
def delete(
    names: list[str] = typer.Argument(..., metavar="TOPIC...", help="Topics to delete."),
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    timeout: float = TimeoutOption,
) -> None:
    """Delete topics and their data."""
    failed = False
    with kafka_errors():
        admin = _admin(bootstrap, client_config, command_config)  # kept alive until the futures resolve
        futures = admin.delete_topics(names, operation_timeout=timeout,
                                                  request_timeout=timeout)
        for name in names:
            try:
                result(futures[name], timeout)
            except typer.Exit:
                raise
            except Exception as exc:
                print(f"Error: topic {name}: {describe_error(exc)}", file=sys.stderr)
                failed = True
                continue
            print(f"Deleted topic {name}.")
    if failed:
        raise typer.Exit(1)
