"""`odradek config list --broker|--topic`: every config key a node or a topic takes.

Read from the config tables the node itself validates with (odradek.metadata.config), so
the listing cannot drift from what `serve --set` and `topic create -c` accept.
"""

from __future__ import annotations

from typing import Any

import typer

from odradek.cli.common import usage
from odradek.cli.table import FormatOption, check_format, emit

app = typer.Typer(help="Show the config keys nodes and topics take.", no_args_is_help=True)

HEADER = ["NAME", "TYPE", "DEFAULT", "DYNAMIC", "DOC"]


def _type_name(defn: Any) -> str:
    return str(defn.type.name.lower())


def _default(defn: Any, broker: dict[str, Any]) -> str:
    """The default as a user would write it; a topic config without its own default takes
    its broker synonym's (as Kafka does), shown as that value."""
    from odradek.metadata.config.config_def import to_config_string

    if defn.sensitive:
        return ""
    value = defn.default
    if value is None and defn.synonyms:
        syn = broker.get(defn.synonyms[0].name)
        if syn is not None and syn.default is not None:
            value = syn.default * defn.synonyms[0].multiplier \
                if isinstance(syn.default, int) and not isinstance(syn.default, bool) \
                else syn.default
    text = to_config_string(value)
    return "" if text is None else text


def first_sentence(doc: str) -> str:
    text = " ".join(doc.split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def config_rows(kind: str) -> list[list[Any]]:
    from odradek.metadata.config.broker_configs import BROKER_CONFIGS
    from odradek.metadata.config.topic_configs import TOPIC_CONFIGS

    table = BROKER_CONFIGS if kind == "broker" else TOPIC_CONFIGS
    rows = []
    for name in sorted(table):
        defn = table[name]
        # every topic config can be altered (topic alter-config); broker ones only some
        dynamic = "yes" if kind == "topic" or defn.dynamic else "no"
        rows.append([name, _type_name(defn), _default(defn, BROKER_CONFIGS), dynamic,
                     first_sentence(defn.doc)])
    return rows


@app.command("list")
def list_(
    broker: bool = typer.Option(False, "--broker",
                                help="Node configs: what `serve --set` and `--config` take."),
    topic: bool = typer.Option(False, "--topic",
                               help="Topic configs: what `topic create -c` and "
                                    "`topic alter-config --set` take."),
    fmt: str = FormatOption,
) -> None:
    """Every config key with its type, default, whether it can change at runtime, and what
    it does."""
    check_format(fmt)
    if broker == topic:
        usage("give exactly one of --broker or --topic")
    emit(HEADER, config_rows("broker" if broker else "topic"), fmt)
