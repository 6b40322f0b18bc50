"""Option names a pipeline may give a source or a flow, checked before Spark sees them.

Spark's Kafka connector ignores an option it does not know, so a typo (`startingOffset`)
silently reads from the default position; a pipeline fails instead, naming the option.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.spark.pipeline.model import PipelineError

SOURCE_OPTIONS = (
    "assign", "subscribe", "subscribePattern",
    "startingOffsets", "startingOffsetsByTimestamp", "startingTimestamp",
    "startingOffsetsByTimestampStrategy",
    "endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp",
    "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    "minPartitions", "failOnDataLoss", "includeHeaders", "fetchPath",
    "groupIdPrefix", "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
)
SINK_OPTIONS = ("topic", "deliveryGuarantee", "includeHeaders")
# Flow settings that are not sink options: how Spark runs the query.
FLOW_SETTINGS = ("outputMode", "triggerInterval")
OUTPUT_MODES = ("append", "update", "complete")


def _check(kind: str, name: str, where: str, options: Mapping[str, str], known: tuple[str, ...]) -> None:
    allowed = {k.lower() for k in known}
    for key in options:
        if key.lower().startswith("kafka."):
            continue
        if key.lower() not in allowed:
            raise PipelineError(f"{where}: {kind} '{name}': unknown option '{key}' "
                                f"(known: {', '.join(known)}, kafka.*)")


def source_options(name: str, where: str, options: Mapping[str, str], bootstrap: str | None,
                   client: Mapping[str, str] | None = None) -> dict[str, str]:
    _check("source", name, where, options, SOURCE_OPTIONS)
    strategies = [k for k in options if k.lower() in ("assign", "subscribe", "subscribepattern")]
    if len(strategies) != 1:
        raise PipelineError(f"{where}: source '{name}': exactly one of the options 'assign', 'subscribe', "
                            f"'subscribePattern' must be given" + (f" (got {', '.join(strategies)})" if strategies else ""))
    return with_bootstrap(options, bootstrap, client)


def sink_options(name: str, where: str, options: Mapping[str, str], bootstrap: str | None,
                 client: Mapping[str, str] | None = None) -> dict[str, str]:
    _check("flow", name, where, options, SINK_OPTIONS + FLOW_SETTINGS)
    settings = {k.lower() for k in FLOW_SETTINGS}
    return with_bootstrap({k: v for k, v in options.items() if k.lower() not in settings}, bootstrap,
                          client)


def output_mode(name: str, where: str, mode: str) -> str:
    if mode.lower() not in OUTPUT_MODES:
        raise PipelineError(f"{where}: flow '{name}': outputMode must be one of {', '.join(OUTPUT_MODES)}, "
                            f"got '{mode}'")
    return mode.lower()


def with_bootstrap(options: Mapping[str, str], bootstrap: str | None,
                   client: Mapping[str, str] | None = None) -> dict[str, str]:
    """The options, plus the run's bootstrap and client settings (`client`: Kafka client
    names, from -X/--command-config) as kafka.* options where the element gives none."""
    out = {str(k): str(v) for k, v in options.items()}
    given = {k.lower() for k in out}
    if bootstrap and "kafka.bootstrap.servers" not in given:
        out["kafka.bootstrap.servers"] = bootstrap
    for key, value in (client or {}).items():
        if f"kafka.{key}".lower() not in given:
            out[f"kafka.{key}"] = str(value)
    return out
