"""`odradek registry`: run the Schema Registry, and use one over its REST API (Confluent's).

    odradek registry serve -b localhost:9092
    odradek registry subject list|versions|get|delete
    odradek registry schema register|get
    odradek registry compatibility check|get|set

Every client command takes `--registry-url` (default http://localhost:8081, or the
ODRADEK_REGISTRY_URL environment variable) and works against any registry that speaks
Confluent's API. Listings are tables, or JSON with `--format json`. A refusal prints the
registry's message and its error code (`Error: Subject 'x' not found. (40401)`), exit 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote

import typer

from odradek.cli.common import (
    ClientConfigOption,
    CommandConfigOption,
    client_overrides,
    fail,
    usage,
)
from odradek.cli.table import FormatOption, check_format, emit

app = typer.Typer(help="The Schema Registry (Confluent's REST API), kept in the _schemas topic.",
                  no_args_is_help=True)
subject_app = typer.Typer(help="List, show and delete subjects and their versions.",
                          no_args_is_help=True)
schema_app = typer.Typer(help="Register schemas and get them by id.", no_args_is_help=True)
compat_app = typer.Typer(help="Check a schema against a subject; get or set compatibility levels.",
                         no_args_is_help=True)
app.add_typer(subject_app, name="subject")
app.add_typer(schema_app, name="schema")
app.add_typer(compat_app, name="compatibility")

DEFAULT_URL = "http://localhost:8081"
URL_ENV = "ODRADEK_REGISTRY_URL"
CT = "application/vnd.schemaregistry.v1+json"
TYPES = ("AVRO", "JSON", "PROTOBUF")
LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
          "FULL_TRANSITIVE")

UrlOption = typer.Option(DEFAULT_URL, "--registry-url", envvar=URL_ENV, metavar="URL",
                         help="The registry's base URL.")
TimeoutOption = typer.Option(30.0, "--timeout", metavar="SECONDS",
                             help="Seconds to wait for the registry's answer.")


class _Refused(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _call(url: str, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
    """The decoded JSON answer; _Refused for an error answer; fail() when unreachable."""
    import urllib.error
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url.rstrip("/") + path, data=data, method=method,
                                 headers={"Content-Type": CT, "Accept": CT})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            err = json.loads(raw)
            raise _Refused(exc.code, int(err["error_code"]), str(err["message"])) from None
        except (ValueError, KeyError, TypeError):
            raise _Refused(exc.code, exc.code, raw.decode(errors="replace")[:200]
                           or exc.reason) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        fail(f"cannot reach the registry at {url}: {reason}")
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        fail(f"the registry at {url} answered something that is not JSON: {raw[:100]!r}")


def _refused(exc: _Refused) -> NoReturn:
    fail(f"{exc.message} ({exc.code})")


def _q(name: str) -> str:
    return quote(name, safe="")


def _params(**flags: Any) -> str:
    parts = [f"{k}={'true' if v is True else _q(str(v))}" for k, v in flags.items()
             if v is not None and v is not False]
    return "?" + "&".join(parts) if parts else ""


# ---- serve ----------------------------------------------------------------------------------
@app.command("serve")
def serve(
    bootstrap: str | None = typer.Option(None, "--bootstrap-server", "-b", metavar="HOST:PORT",
                                         help="The cluster to keep _schemas in."),
    listeners: str = typer.Option("http://127.0.0.1:8081", "--listeners", metavar="URLS",
                                  help="Comma-separated http://host:port to serve on."),
    topic: str = typer.Option("_schemas", "--topic", metavar="TOPIC",
                              help="The compacted topic (kafkastore.topic)."),
    leader_eligibility: bool = typer.Option(
        True, "--leader-eligibility/--no-leader-eligibility",
        help="May this instance be elected the writer (leader.eligibility)? Followers forward "
             "writes to the leader."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    inherit_fds: str = typer.Option("", "--inherit-fds", hidden=True,
                                    help="Listening sockets bound by `odradek serve`, one per "
                                         "listener, in order."),
) -> None:
    """Serve the registry until SIGTERM or Ctrl-C (it reads _schemas to the end first).

    Its producer, consumers and admin client log in with the client settings given (-X
    security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-512 ..., or a --command-config
    file, as Confluent's kafkastore.* settings); refused credentials end it at once."""
    import logging

    from odradek.client import resolve_bootstrap
    from odradek.registry.server import parse_listener, run

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        for item in listeners.split(","):
            parse_listener(item)
    except ValueError as exc:
        typer.echo(f"odradek registry serve: {exc}", err=True)
        raise typer.Exit(2) from None
    overrides = client_overrides(client_config, command_config)
    fds = [int(fd) for fd in inherit_fds.split(",") if fd.strip()]
    raise typer.Exit(run(resolve_bootstrap(bootstrap), listeners, topic, leader_eligibility,
                         fds=fds, client=overrides))


# ---- subject --------------------------------------------------------------------------------
@subject_app.command("list")
def subject_list(
    deleted: bool = typer.Option(False, "--deleted", help="Include soft-deleted subjects."),
    prefix: str = typer.Option("", "--prefix", metavar="TEXT",
                               help="Only subjects whose name starts with this."),
    fmt: str = FormatOption,
    url: str = UrlOption,
    timeout: float = TimeoutOption,
) -> None:
    """List the subjects (SUBJECT TYPE LATEST-VERSION LATEST-ID)."""
    check_format(fmt)
    try:
        names = _call(url, "GET", "/subjects" + _params(deleted=deleted, subjectPrefix=prefix
                                                        or None), timeout=timeout)
        rows = []
        for name in names:
            try:
                latest = _call(url, "GET", f"/subjects/{_q(name)}/versions/latest"
                               + _params(deleted=deleted), timeout=timeout)
                rows.append([name, latest.get("schemaType", "AVRO"), latest["version"],
                             latest["id"]])
            except _Refused:  # deleted between the two calls
                rows.append([name, None, None, None])
    except _Refused as exc:
        _refused(exc)
    emit(["SUBJECT", "TYPE", "LATEST-VERSION", "LATEST-ID"], rows, fmt)


@subject_app.command("versions")
def subject_versions(
    subject: str = typer.Argument(..., help="The subject."),
    deleted: bool = typer.Option(False, "--deleted", help="Include soft-deleted versions."),
    fmt: str = FormatOption,
    url: str = UrlOption,
    timeout: float = TimeoutOption,
) -> None:
    """List a subject's versions (VERSION ID TYPE REFERENCES)."""
    check_format(fmt)
    try:
        numbers = _call(url, "GET", f"/subjects/{_q(subject)}/versions" + _params(
            deleted=deleted), timeout=timeout)
        rows = []
        for n in numbers:
            v = _call(url, "GET", f"/subjects/{_q(subject)}/versions/{n}"
                      + _params(deleted=deleted), timeout=timeout)
            rows.append([v["version"], v["id"], v.get("schemaType", "AVRO"),
                         len(v.get("references") or [])])
    except _Refused as exc:
        _refused(exc)
    emit(["VERSION", "ID", "TYPE", "REFERENCES"], rows, fmt)


@subject_app.command("get")
def subject_get(
    subject: str = typer.Argument(..., help="The subject."),
    version: str = typer.Option("latest", "--version", "-v", metavar="N|latest",
                                help="Which version."),
    deleted: bool = typer.Option(False, "--deleted", help="Also find soft-deleted versions."),
    fmt: str = FormatOption,
    url: str = UrlOption,
    timeout: float = TimeoutOption,
) -> None:
    """Show one version: its id, type and references, then the schema text."""
    check_format(fmt)
    try:
        v = _call(url, "GET", f"/subjects/{_q(subject)}/versions/{_q(version)}"
                  + _params(deleted=deleted), timeout=timeout)
    except _Refused as exc:
        _refused(exc)
    if fmt == "json":
        print(json.dumps(v, indent=2))
        return
    refs = ", ".join(f"{r['name']}={r['subject']}:{r['version']}"
                     for r in v.get("references") or [])
    emit(["SUBJECT", "VERSION", "ID", "TYPE", "REFERENCES"],
         [[v["subject"], v["version"], v["id"], v.get("schemaType", "AVRO"), refs]])
    print()
    print(_pretty(v["schema"], v.get("schemaType", "AVRO")))


@subject_app.command("delete")
def subject_delete(
    subject: str = typer.Argument(..., help="The subject."),
    version: str | None = typer.Option(None, "--version", "-v", metavar="N|latest",
                                       help="Delete one version, not the whole subject."),
    permanent: bool = typer.Option(False, "--permanent",
                                   help="Hard delete (after a soft delete): the records go."),
    fmt: str = FormatOption,
    url: str = UrlOption,
    timeout: float = TimeoutOption,
) -> None:
    """Delete a subject or one of its versions: soft, or with --permanent for good."""
    check_format(fmt)
    path = f"/subjects/{_q(subject)}" + (f"/versions/{_q(version)}" if version else "")
    try:
        out = _call(url, "DELETE", path + _params(permanent=permanent), timeout=timeout)
    except _Refused as exc:
        _refused(exc)
    versions = out if isinstance(out, list) else [out]
    emit(["SUBJECT", "VERSION", "DELETED"],
         [[subject, n, "permanently" if permanent else "soft"] for n in versions], fmt)


# ---- schema ---------------------------------------------------------------------------------
def _schema_body(schema: str | None, schema_file: Path | None, schema_type: str | None,
                 references: list[str]) -> dict[str, Any]:
    if (schema is None) == (schema_file is None):
        usage("give the schema with exactly one of --schema TEXT or --file FILE")
    if schema_file is not None:
        try:
            schema = schema_file.read_text()
        except OSError as exc:
            usage(f"cannot read {schema_file}: {exc.strerror or exc}")
    kind = (schema_type or _guess_type(schema_file)).upper()
    if kind not in TYPES:
        usage(f"--type must be one of {', '.join(TYPES)}, not {schema_type!r}")
    body: dict[str, Any] = {"schema": schema}
    if kind != "AVRO":
        body["schemaType"] = kind
    refs = []
    for item in references:
        name, sep, rest = item.partition("=")
        subject, sep2, version = rest.rpartition(":")
        if not (sep and sep2 and name and subject and version.isdigit()):
            usage(f"a reference is NAME=SUBJECT:VERSION, not {item!r}")
        refs.append({"name": name, "subject": subject, "version": int(version)})
    if refs:
        body["references"] = refs
    return body


def _guess_type(path: Path | None) -> str:
    suffix = path.suffix.lower() if path else ""
    return {".proto": "PROTOBUF", ".json": "JSON"}.get(suffix, "AVRO")


def _pretty(text: str, kind: str) -> str:
    if kind in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(text), indent=2)
        except ValueError:
            pass
    return text.rstrip("\n")


SchemaOption = typer.Option(None, "--schema", metavar="TEXT", help="The schema text.")
FileOption = typer.Option(None, "--file", "-f", metavar="FILE",
                          help="A file holding the schema (.avsc, .json, .proto).")
TypeOption = typer.Option(None, "--type", "-t", metavar="AVRO|JSON|PROTOBUF",
                          help="The schema type (default: from the file's suffix: .proto is "
                               "PROTOBUF, .json JSON, else AVRO).")
RefOption = typer.Option([], "--reference", "-r", metavar="NAME=SUBJECT:VERSION",
                         help="A schema reference (repeatable): the import or type name, and "
                              "the subject and version that hold it.")


@schema_app.command("register")
def schema_register(
    subject: str = typer.Argument(..., help="The subject to register under."),
    schema: str | None = SchemaOption,
    schema_file: Path | None = FileOption,
    schema_type: str | None = TypeOption,
    reference: list[str] = RefOption,
    normalize: bool = typer.Option(False, "--normalize",
                                   help="Store the schema's normal form (Confluent's normalize)."),
    fmt: str = FormatOption,
    url: str = UrlOption,
    timeout: float = TimeoutOption,
) -> None:
    """Register a schema under a subject; print its id and version (the same schema again gets
    the same id and no new version)."""
    check_format(fmt)
    body = _schema_body(schema, schema_file, schema_type, reference)
    try:
        out = _call(url, "POST", f"/subjects/{_q(subject)}/versions"
                    + _params(normalize=normalize), body, timeout)
        found = _call(url, "POST", f"/subjects/{_q(subject)}" + _params(normalize=normalize),
                      body, timeout)
    except _Refused as exc:
        _refused(exc)
    emit(["SUBJECT", "VERSION", "ID"], [[subject, found["version"], out["id"]]], fmt)


@schema_app.command("get")
def schema_get(
    schema_id: int = typer.Argument(..., metavar="ID", help="The schema id."),
    fmt: str = FormatOption,
    url: str = UrlOption,
    timeout: float = TimeoutOption,
) -> None:
    """Show a schema by id: where it is used (subject and version), then its text."""
    check_format(fmt)
    try:
        found = _call(url, "GET", f"/schemas/ids/{schema_id}", timeout=timeout)
        uses = _call(url, "GET", f"/schemas/ids/{schema_id}/versions", timeout=timeout)
    except _Refused as exc:
        _refused(exc)
    if fmt == "json":
        print(json.dumps({"id": schema_id, **found, "versions": uses}, indent=2))
        return
    kind = found.get("schemaType", "AVRO")
    emit(["ID", "TYPE", "SUBJECT", "VERSION"],
         [[schema_id, kind, u["subject"], u["version"]] for u in uses]
         or [[schema_id, kind, None, None]])
    print()
    print(_pretty(found["schema"], kind))


# ---- compatibility --------------------------------------------------------------------------
@compat_app.command("check")
def compatibility_check(
    subject: str = typer.Argument(..., help="The subject to check against."),
    schema: str | None = SchemaOption,
    schema_file: Path | None = FileOption,
    schema_type: str | None = TypeOption,
    reference: list[str] = RefOption,
    version: str = typer.Option("latest", "--version", "-v", metavar="N|latest|all",
                                help="The version to check against; `all` uses the subject's "
                                     "level over every version it applies to."),
    fmt: str = FormatOption,
    url: str = UrlOption,
    timeout: float = TimeoutOption,
) -> None:
    """Would this schema be accepted under the subject's compatibility level? Prints the
    verdict and the reasons; exit 1 when it is incompatible."""
    check_format(fmt)
    body = _schema_body(schema, schema_file, schema_type, reference)
    path = f"/compatibility/subjects/{_q(subject)}/versions"
    if version != "all":
        path += f"/{_q(version)}"
    try:
        out = _call(url, "POST", path + "?verbose=true", body, timeout)
        level = _call(url, "GET", f"/config/{_q(subject)}?defaultToGlobal=true",
                      timeout=timeout)["compatibilityLevel"]
    except _Refused as exc:
        _refused(exc)
    ok = bool(out["is_compatible"])
    if fmt == "json":
        print(json.dumps({"subject": subject, "level": level, "compatible": ok,
                          "messages": out.get("messages", [])}, indent=2))
    else:
        emit(["SUBJECT", "LEVEL", "COMPATIBLE"], [[subject, level, "yes" if ok else "no"]])
        for message in out.get("messages", []):
            print(f"  {message}")
    if not ok:
        raise typer.Exit(1)


@compat_app.command("get")
def compatibility_get(
    subject: str | None = typer.Argument(None, help="A subject (default: the global level)."),
    fmt: str = FormatOption,
    url: str = UrlOption,
    timeout: float = TimeoutOption,
) -> None:
    """Show the compatibility level of a subject (its own, else the global one) or the global
    level."""
    check_format(fmt)
    path = "/config" + (f"/{_q(subject)}?defaultToGlobal=true" if subject else "")
    try:
        level = _call(url, "GET", path, timeout=timeout)["compatibilityLevel"]
    except _Refused as exc:
        _refused(exc)
    emit(["SUBJECT", "LEVEL"], [[subject or "(global)", level]], fmt)


@compat_app.command("set")
def compatibility_set(
    level: str = typer.Argument(..., metavar="LEVEL", help=", ".join(LEVELS) + "."),
    subject: str | None = typer.Option(None, "--subject", "-s", metavar="SUBJECT",
                                       help="Set it for one subject (default: the global one)."),
    fmt: str = FormatOption,
    url: str = UrlOption,
    timeout: float = TimeoutOption,
) -> None:
    """Set the compatibility level, globally or for one subject."""
    check_format(fmt)
    if level.upper() not in LEVELS:
        usage(f"LEVEL must be one of {', '.join(LEVELS)}, not {level!r}")
    path = "/config" + (f"/{_q(subject)}" if subject else "")
    try:
        out = _call(url, "PUT", path, {"compatibility": level.upper()}, timeout)
    except _Refused as exc:
        _refused(exc)
    emit(["SUBJECT", "LEVEL"], [[subject or "(global)", out["compatibility"]]], fmt)
