"""JBOD (issue 20): each log directory's identity (meta.properties: the node's cluster.id and
node.id, its own directory.id), and the directory ids in the broker's registration (Kafka
3.7+: BrokerRegistration's log_dirs), kept across a reload of the metadata log."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.broker.log_dirs import directory_ids, log_dirs_of, prepare_log_dirs
from odradek.broker.startup import StartRefused
from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.controller import Controller, load_image
from odradek.metadata.meta_properties import (
    ensure_meta_properties,
    read_meta_properties,
    write_meta_properties,
)
from odradek.metadata.quorum import MetadataQuorum
from odradek.storage.log_dir_failure import channel_for


def test_log_dirs_are_the_data_dir_then_log_dirs_once(tmp_path: Path) -> None:
    d0, d1, d2 = tmp_path / "d0", tmp_path / "d1", tmp_path / "d2"
    config = BrokerConfig.from_properties({"log.dirs": f"{d0},{d1}, {d2}"})
    assert log_dirs_of(d0, config) == [d0, d1, d2]
    assert log_dirs_of(d0, BrokerConfig.from_properties({})) == [d0]


def test_every_directory_gets_the_node_identity_and_its_own_id(tmp_path: Path) -> None:
    d0, d1, d2 = tmp_path / "d0", tmp_path / "d1", tmp_path / "d2"
    meta = ensure_meta_properties(d0, 3)
    ids = prepare_log_dirs([d0, d1, d2], meta)
    assert len(set(ids.values())) == 3
    for d in (d1, d2):
        other = read_meta_properties(d)
        assert other is not None
        assert (other.cluster_id, other.node_id) == (meta.cluster_id, 3)
    assert prepare_log_dirs([d0, d1, d2], meta) == ids  # stable across starts
    assert len(directory_ids(ids)) == 3


def test_a_directory_of_another_node_refuses_the_start(tmp_path: Path) -> None:
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    meta = ensure_meta_properties(d0, 3)
    ensure_meta_properties(d1, 4, meta.cluster_id)
    with pytest.raises(StartRefused, match="node id"):
        prepare_log_dirs([d0, d1], meta)


def test_a_copied_directory_refuses_the_start(tmp_path: Path) -> None:
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    meta = ensure_meta_properties(d0, 3)
    write_meta_properties(d1, meta)  # the same directory.id
    with pytest.raises(StartRefused, match=r"directory\.id"):
        prepare_log_dirs([d0, d1], meta)


def test_an_unusable_directory_goes_offline_and_the_rest_start(tmp_path: Path) -> None:
    d0, d1, d2 = tmp_path / "d0", tmp_path / "d1", tmp_path / "d2"
    meta = ensure_meta_properties(d0, 3)
    d1.write_bytes(b"")  # a file where the directory should be
    channel = channel_for(d1)
    ids = prepare_log_dirs([d0, d1, d2], meta)
    assert set(ids) == {d0, d2}
    assert channel.offline


def test_the_registration_carries_the_directory_ids(tmp_path: Path) -> None:
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    meta = ensure_meta_properties(d0, 1)
    ids = directory_ids(prepare_log_dirs([d0, d1], meta))
    quorum = MetadataQuorum.open(tmp_path / "meta", node_id=1)
    controller = Controller(quorum, load_image(quorum, "cid"), BrokerConfig.from_properties({}))
    controller.bootstrap()
    controller.register_broker(log_dirs=ids)
    assert list(controller.image.brokers[1].log_dirs) == ids
    quorum.close()
    quorum = MetadataQuorum.open(tmp_path / "meta", node_id=1)
    try:
        assert list(load_image(quorum, "cid").brokers[1].log_dirs) == ids
    finally:
        quorum.close()
