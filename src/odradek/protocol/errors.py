"""Kafka error codes and the exceptions the protocol layer raises.

`ErrorCode` is kio's enum: Kafka's names (lower case) and numbers, e.g.
`ErrorCode.unknown_topic_or_partition == 3`.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = [
    "CorruptRecord",
    "ErrorCode",
    "FrameTooLarge",
    "InvalidRecord",
    "KafkaError",
    "OffsetOutOfRange",
    "ProtocolError",
    "UnsupportedVersion",
]


class KafkaError(Exception):
    """A failure whose right answer is a Kafka error code in the response."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(f"{code.name.upper()}: {message}" if message else code.name.upper())
        self.code = ErrorCode(code)
        self.message = message


class ProtocolError(ValueError):
    """Malformed bytes: truncated, bad length, bad varint, bad enum value.

    The broker answers these with a clean disconnect (or the request's error
    code where the header could be parsed).
    """


class UnsupportedVersion(ProtocolError):
    """A request for an (api key, version) we cannot decode."""

    def __init__(self, api_key: int, api_version: int, message: str = "") -> None:
        super().__init__(message or f"unsupported version {api_version} of api key {api_key}")
        self.api_key = api_key
        self.api_version = api_version
        self.code = ErrorCode.unsupported_version


class FrameTooLarge(ProtocolError):
    """A frame's declared size is negative or above the configured maximum."""

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"frame size {size} outside [0, {max_size}]")
        self.size = size
        self.max_size = max_size


class CorruptRecord(KafkaError):
    """CRC mismatch, bad batch framing: Kafka's CORRUPT_MESSAGE."""

    def __init__(self, message: str = "") -> None:
        super().__init__(ErrorCode.corrupt_message, message)


class InvalidRecord(KafkaError):
    """A well-framed batch Kafka refuses (e.g. magic 0/1 on produce v3+): INVALID_RECORD.

    `record_errors` names the records at fault, (index in the batch, message), when the fault
    is theirs and not the batch's: Produce v8+ returns them (KIP-467) so the client fails only
    those records.
    """

    def __init__(self, message: str = "",
                 record_errors: tuple[tuple[int, str | None], ...] = ()) -> None:
        super().__init__(ErrorCode.invalid_record, message)
        self.record_errors = record_errors


class OffsetOutOfRange(KafkaError):
    """A fetch/read offset outside [log start offset, log end offset]."""

    def __init__(self, message: str = "") -> None:
        super().__init__(ErrorCode.offset_out_of_range, message)
