"""Confluent's registry error codes, raised by the state and turned into JSON by the app."""

from __future__ import annotations

SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
SCHEMA_VERSION_SOFT_DELETED = 40406
SCHEMA_VERSION_NOT_SOFT_DELETED = 40407
SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED = 40408
INCOMPATIBLE = 409
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INVALID_MODE = 42204
OPERATION_NOT_PERMITTED = 42205
REFERENCE_EXISTS = 42206
ID_DOES_NOT_MATCH = 42207
STORE_ERROR = 50001
OPERATION_TIMEOUT = 50002
FORWARD_ERROR = 50003


class RegistryError(Exception):
    """An answer with an HTTP status and Confluent's error_code."""

    def __init__(self, error_code: int, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        # Confluent's HTTP status is the first three digits of the code (40401 -> 404).
        self.status = status if status is not None else int(str(error_code)[:3])


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: object) -> RegistryError:
    return RegistryError(VERSION_NOT_FOUND, f"Version {version} not found.")


def schema_not_found(detail: str = "Schema not found") -> RegistryError:
    return RegistryError(SCHEMA_NOT_FOUND, detail)


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(INVALID_SCHEMA, f"Invalid schema: {detail}")


def invalid_version(version: object) -> RegistryError:
    return RegistryError(
        INVALID_VERSION,
        f"The specified version '{version}' is not a valid version id. Allowed values are "
        "between [1, 2^31-1] and the string \"latest\"")
