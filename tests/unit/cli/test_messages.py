"""Error texts and tables the CLI prints, checked without a node."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError

from odradek.cli.common import kafka_error_text
from odradek.cli.reach import split_address
from odradek.cli.table import emit, render_table


@pytest.mark.parametrize("code", [KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
                                  KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE,
                                  KafkaError._MSG_TIMED_OUT, KafkaError._SSL,
                                  KafkaError._UNKNOWN_PARTITION, KafkaError._DESTROY])
def test_local_errors_lose_librdkafka_names(code: int) -> None:
    text = kafka_error_text(KafkaError(code, "Local: something broke"))
    assert not text.startswith("_") and "Local:" not in text, text


def test_broker_errors_keep_kafka_names() -> None:
    err = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, "Broker: Unknown topic or partition")
    assert kafka_error_text(err).startswith("UNKNOWN_TOPIC_OR_PARTITION: ")
    assert kafka_error_text(KafkaError(KafkaError._UNKNOWN_TOPIC)).startswith(
        "UNKNOWN_TOPIC_OR_PARTITION")


@pytest.mark.parametrize("text,expected", [
    ("localhost:9092", ("localhost", 9092)),
    ("[::1]:9093", ("::1", 9093)),
    ("PLAINTEXT://10.0.0.1:19092", ("10.0.0.1", 19092)),
])
def test_split_address(text: str, expected: tuple[str, int]) -> None:
    assert split_address(text) == expected


@pytest.mark.parametrize("text", ["localhost", ":9092", "host:port", "host:70000", "host:"])
def test_malformed_addresses(text: str) -> None:
    with pytest.raises(ValueError, match="use host:port"):
        split_address(text)


def test_table_columns_align_and_missing_values_show_a_dash() -> None:
    text = render_table(["NAME", "N"], [["a", 1], ["longer-name", None]])
    assert text.splitlines() == ["NAME         N", "a            1", "longer-name  -"]


def test_json_keys_from_headers(capsys: pytest.CaptureFixture[str]) -> None:
    emit(["LOG-END-OFFSET", "#MEMBERS", "COORDINATOR (ID)"], [[5, 2, None]], "json",
         extra={"total_lag": 3})
    assert json.loads(capsys.readouterr().out) == {
        "total_lag": 3, "rows": [{"log_end_offset": 5, "members": 2, "coordinator_id": None}]}
