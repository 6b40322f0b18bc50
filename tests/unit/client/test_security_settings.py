"""Kafka client security settings (a --command-config file, Spark's kafka.* options) for
librdkafka and the native client: translated, or refused by name, never dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.client.secure_socket import NOT_HANDLED, ClientSecurity
from odradek.client.security_settings import for_librdkafka, read_command_config
from odradek.spark.options import OptionError, client_settings

JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="admin" password="a b;c";')


def test_command_config_file(tmp_path: Path) -> None:
    f = tmp_path / "client.properties"
    f.write_text("# a comment\nsecurity.protocol=SASL_SSL\nsasl.mechanism: SCRAM-SHA-256\n"
                 "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \\\n"
                 "  required username=\"u\" password=\"p\";\n"
                 "ssl.truststore.type=PEM\nssl.truststore.location=/ca.pem\n")
    assert for_librdkafka(read_command_config(f)) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "u", "sasl.password": "p", "ssl.ca.location": "/ca.pem"}
    with pytest.raises(ValueError, match="missing"):
        read_command_config(tmp_path / "missing.properties")


def test_translations_and_refusals() -> None:
    assert for_librdkafka({"sasl.jaas.config": JAAS})["sasl.password"] == "a b;c"
    assert for_librdkafka({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem"}) == {
        "ssl.certificate.location": "/k.pem", "ssl.key.location": "/k.pem"}
    assert for_librdkafka({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/k.p12",
                           "ssl.keystore.password": "x"}) == {
        "ssl.keystore.location": "/k.p12", "ssl.keystore.password": "x"}
    for bad in ({"ssl.truststore.location": "/t.jks"}, {"ssl.keystore.location": "/k.jks"},
                {"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"}):
        with pytest.raises(ValueError):
            for_librdkafka(bad)


def test_spark_options_translate_java_names() -> None:
    got = client_settings({"kafka.bootstrap.servers": "h:1", "kafka.sasl.jaas.config": JAAS,
                           "kafka.security.protocol": "SASL_SSL"})
    assert got["sasl.username"] == "admin" and "sasl.jaas.config" not in got
    with pytest.raises(OptionError, match="truststore"):
        client_settings({"kafka.bootstrap.servers": "h:1",
                         "kafka.ssl.truststore.location": "/x.jks"})


def test_native_client_takes_only_what_it_honours() -> None:
    assert ClientSecurity.from_settings({"bootstrap.servers": "h:1"}) is None
    sec = ClientSecurity.from_settings({"security.protocol": "SASL_PLAINTEXT",
                                        "sasl.mechanism": "SCRAM-SHA-512",
                                        "sasl.username": "u", "sasl.password": "secret"})
    assert isinstance(sec, ClientSecurity) and "secret" not in repr(sec)
    for settings in ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"},
                     {"security.protocol": "SASL_PLAINTEXT"},  # GSSAPI, librdkafka's default
                     {"security.protocol": "SSL", "ssl.keystore.location": "/k.p12"}):
        assert ClientSecurity.from_settings(settings) is NOT_HANDLED
