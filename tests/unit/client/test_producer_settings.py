"""The columnar producer's librdkafka-named settings for retries and idempotence."""

from __future__ import annotations

import pytest

from odradek.client.producer_columnar import settings_from


def test_idempotence_and_delivery_timeout_are_read() -> None:
    s = settings_from("all", {"enable.idempotence": "true", "delivery.timeout.ms": "5000"})
    assert (s.acks, s.enable_idempotence, s.delivery_timeout_ms) == (-1, True, 5000)
    d = settings_from("1", None)
    assert (d.enable_idempotence, d.delivery_timeout_ms) == (False, 120000)  # librdkafka's
    assert settings_from("1", {"message.timeout.ms": "700"}).delivery_timeout_ms == 700


@pytest.mark.parametrize("acks", ["0", "1"])
def test_idempotence_needs_acks_all(acks: str) -> None:
    with pytest.raises(ValueError, match="acks=all"):
        settings_from(acks, {"enable.idempotence": "true"})
