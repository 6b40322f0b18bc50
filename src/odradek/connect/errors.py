"""Connect's REST errors: `{"error_code": <HTTP status>, "message": ...}` (ConnectExceptionMapper)."""

from __future__ import annotations


class ConnectError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.status, "message": self.message}


def not_found(name: str) -> ConnectError:
    return ConnectError(404, f"Connector {name} not found")


def bad_request(message: str) -> ConnectError:
    return ConnectError(400, message)


def conflict(message: str) -> ConnectError:
    return ConnectError(409, message)
