"""Finalized features (a mixin of `Controller`): metadata.version and transaction.version,
written as FeatureLevelRecords at the cluster's first start, checked against what a
registering broker supports, and changed by UpdateFeatures (57). Brokers advertise the
finalized levels in ApiVersions, which is how Java 4.x clients learn that
transaction.version 2 (KIP-890's transactions) is on."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from odradek.metadata.controller_requests import FeatureUpdate, FeatureUpdateResult
from odradek.metadata.image import MetadataImage
from odradek.metadata.records import FeatureLevelRecord, MetadataRecord
from odradek.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "FINALIZED_AT_BOOTSTRAP",
    "METADATA_VERSION",
    "SUPPORTED_FEATURES",
    "FeatureControl",
]

log = logging.getLogger(__name__)

METADATA_VERSION = ("metadata.version", 21)  # 3.9-IV0
# what this build supports: name -> (min level, max level)
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {
    "metadata.version": (1, METADATA_VERSION[1]),
    "transaction.version": (0, 2),
}
# what a new cluster finalizes
FINALIZED_AT_BOOTSTRAP: dict[str, int] = {
    "metadata.version": METADATA_VERSION[1],
    "transaction.version": 2,
}

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


class FeatureControl:
    # provided by Controller
    image: MetadataImage
    _lock: Any
    _commit: Any
    _require_active: Any

    def bootstrap_feature_records(self) -> list[MetadataRecord]:
        """Levels a new cluster finalizes that its log does not hold yet (a data directory of
        an older odradek gets transaction.version here at its next start)."""
        features = self.image.features
        return [FeatureLevelRecord(name, level) for name, level in FINALIZED_AT_BOOTSTRAP.items()
                if name not in features]

    def supported_feature_tuples(self) -> list[tuple[str, int, int]]:
        return [(name, lo, hi) for name, (lo, hi) in SUPPORTED_FEATURES.items()]

    def finalized_features(self) -> dict[str, int]:
        return dict(self.image.features)

    def check_broker_features(self, features: Iterable[tuple[str, int, int]]) -> None:
        """A registering broker must support every finalized level (UNSUPPORTED_VERSION), as
        Kafka's ClusterControlManager checks; a feature it does not list counts as level 0."""
        offered = {name: (lo, hi) for name, lo, hi in features}
        for name, level in self.image.features.items():
            lo, hi = offered.get(name, (0, 0))
            if not lo <= level <= hi:
                raise KafkaError(
                    ErrorCode.unsupported_version,
                    f"Unable to register because the broker does not support finalized "
                    f"version {level} of {name}. The broker supports versions {lo}-{hi}.")

    def update_features(self, updates: Sequence[FeatureUpdate], validate_only: bool = False
                        ) -> list[FeatureUpdateResult]:
        """UpdateFeatures (57): each update checked alone; what passes is written together
        (Kafka writes all or nothing: one bad update fails the request, see the handler)."""
        with self._lock:
            self._require_active()
            results: list[FeatureUpdateResult] = []
            records: list[MetadataRecord] = []
            for update in updates:
                try:
                    record = self._feature_change(update)
                except KafkaError as exc:
                    results.append(FeatureUpdateResult(update.feature, exc.code, exc.message))
                    continue
                if record is not None:
                    records.append(record)
                results.append(FeatureUpdateResult(update.feature))
            if any(r.error_code != ErrorCode.none for r in results):
                return results
            if not validate_only:
                self._commit(records)
                for r in records:
                    log.info("feature %s finalized at level %d", r.name, r.feature_level)
            return results

    def _feature_change(self, update: FeatureUpdate) -> FeatureLevelRecord | None:
        name, level = update.feature, update.max_version_level
        if name not in SUPPORTED_FEATURES:
            raise KafkaError(ErrorCode.invalid_update_version,
                             f"Unsupported feature {name}")
        if update.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            raise KafkaError(ErrorCode.invalid_update_version,
                             f"Unknown upgrade type {update.upgrade_type}")
        current = self.image.features.get(name, 0)
        if level == current:
            return None
        lo, hi = SUPPORTED_FEATURES[name]
        if level != 0 and not lo <= level <= hi:
            raise KafkaError(ErrorCode.invalid_update_version,
                             f"Invalid update version {level} for feature {name}. The "
                             f"controller supports versions {lo}-{hi}")
        for broker in self.image.brokers.values():
            offered = {f[0]: (f[1], f[2]) for f in broker.features}
            b_lo, b_hi = offered.get(name, (0, 0))
            if level != 0 and not b_lo <= level <= b_hi:
                raise KafkaError(ErrorCode.invalid_update_version,
                                 f"Invalid update version {level} for feature {name}. Broker "
                                 f"{broker.broker_id} only supports versions {b_lo}-{b_hi}")
        if level < current:
            if update.upgrade_type == UPGRADE:
                raise KafkaError(ErrorCode.invalid_update_version,
                                 f"Can't downgrade the version of {name} from {current} to "
                                 f"{level} without setting the upgrade type to either safe or "
                                 "unsafe downgrade.")
            if name == "metadata.version":
                # the log already holds records of the newer version
                raise KafkaError(ErrorCode.invalid_update_version,
                                 "Unsafe metadata.version downgrades are not supported.")
        elif name == "metadata.version" and level == 0:
            raise KafkaError(ErrorCode.invalid_update_version,
                             "metadata.version cannot be removed.")
        return FeatureLevelRecord(name, level)
