"""`odradek connect list|status|create|config|pause|resume|stop|restart|delete|offsets|plugins`:
use any Kafka Connect worker over its REST API (`--url`, default http://localhost:8083, or
ODRADEK_CONNECT_URL). Listings are tables, or JSON with `--format json`; a refusal prints
the worker's message and its error code (`Error: Connector x not found (404)`), exit 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote

import typer

from odradek.cli.common import fail, usage
from odradek.cli.table import FormatOption, check_format, emit

DEFAULT_URL = "http://localhost:8083"
URL_ENV = "ODRADEK_CONNECT_URL"
UrlOption = typer.Option(DEFAULT_URL, "--url", envvar=URL_ENV, metavar="URL",
                         help="The Connect worker's REST URL.")
NameArg = typer.Argument(..., help="The connector's name.")


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _call(url: str, method: str, path: str, body: Any = None) -> Any:
    import urllib.error
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url.rstrip("/") + path, data=data, method=method,
                                 headers={"Content-Type": "application/json",
                                          "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            err = json.loads(raw)
            raise _Refused(exc.code, str(err["message"])) from None
        except (ValueError, KeyError, TypeError):
            raise _Refused(exc.code, raw.decode(errors="replace")[:200] or exc.reason) from None
    except (urllib.error.URLError, OSError) as exc:
        fail(f"cannot reach the Connect worker at {url}: {getattr(exc, 'reason', exc)}")
    return json.loads(raw) if raw else None


def _run(url: str, method: str, path: str, body: Any = None) -> Any:
    try:
        return _call(url, method, path, body)
    except _Refused as exc:
        _refused(exc)


def _refused(exc: _Refused) -> NoReturn:
    fail(f"{exc.message} ({exc.status})")


def _q(name: str) -> str:
    return quote(name, safe="")


def _read_config(source: str) -> dict[str, Any]:
    """`source` is a JSON file (Connect's {"name", "config"} or a bare config), or `-`."""
    import sys

    text = sys.stdin.read() if source == "-" else Path(source).read_text()
    try:
        obj = json.loads(text)
    except ValueError as exc:
        usage(f"{source}: not JSON ({exc})")
    if not isinstance(obj, dict):
        usage(f"{source}: a JSON object is needed")
    return obj


def register(app: typer.Typer) -> None:
    @app.command("list")
    def list_(fmt: str = FormatOption, url: str = UrlOption) -> None:
        """The connectors with their type and states (NAME TYPE STATE TASKS WORKER)."""
        check_format(fmt)
        found = _run(url, "GET", "/connectors?expand=status") or {}
        rows = []
        for name in sorted(found):
            status = found[name]["status"]
            tasks = ",".join(f"{t['id']}:{t['state']}" for t in status["tasks"])
            rows.append([name, status["type"], status["connector"]["state"], tasks or None,
                         status["connector"].get("worker_id")])
        emit(["NAME", "TYPE", "STATE", "TASKS", "WORKER"], rows, fmt)

    @app.command("status")
    def status(name: str = NameArg, fmt: str = FormatOption, url: str = UrlOption) -> None:
        """A connector's and its tasks' states, with the trace of a failure."""
        check_format(fmt)
        body = _run(url, "GET", f"/connectors/{_q(name)}/status")
        rows = [["connector", body["connector"]["state"], body["connector"].get("worker_id"),
                 body["connector"].get("trace", "").splitlines()[-1:] or None]]
        rows += [[f"task {t['id']}", t["state"], t.get("worker_id"),
                  t.get("trace", "").splitlines()[-1:] or None] for t in body["tasks"]]
        emit(["WHAT", "STATE", "WORKER", "ERROR"],
             [[r[0], r[1], r[2], r[3][0] if r[3] else None] for r in rows], fmt)

    @app.command("create")
    def create(source: str = typer.Argument(..., metavar="FILE|-",
                                            help="{\"name\", \"config\"} as JSON."),
               url: str = UrlOption) -> None:
        """Create a connector from Connect's JSON ({"name": ..., "config": {...}})."""
        obj = _read_config(source)
        print(json.dumps(_run(url, "POST", "/connectors", obj), indent=2))

    @app.command("config")
    def config(name: str = NameArg,
               source: str | None = typer.Option(None, "--set-from", metavar="FILE|-",
                                                 help="Replace the config with this JSON."),
               url: str = UrlOption) -> None:
        """Print a connector's config, or replace it (`--set-from`, creating it if new)."""
        if source is None:
            print(json.dumps(_run(url, "GET", f"/connectors/{_q(name)}/config"), indent=2))
            return
        obj = _read_config(source)
        obj = obj.get("config", obj) if isinstance(obj.get("config"), dict) else obj
        print(json.dumps(_run(url, "PUT", f"/connectors/{_q(name)}/config", obj), indent=2))

    def _state(verb: str, method: str, doc: str) -> None:
        def command(name: str = NameArg, url: str = UrlOption) -> None:
            _run(url, method, f"/connectors/{_q(name)}/{verb}")
            print(f"{verb}: {name}")

        command.__doc__ = doc
        app.command(verb)(command)

    _state("pause", "PUT", "Pause a connector (its query stops, its offsets stay).")
    _state("resume", "PUT", "Resume a paused or stopped connector.")
    _state("stop", "PUT", "Stop a connector: no tasks until resumed (KIP-875).")

    @app.command("restart")
    def restart(name: str = NameArg,
                include_tasks: bool = typer.Option(False, "--include-tasks",
                                                   help="Restart the tasks too."),
                only_failed: bool = typer.Option(False, "--only-failed",
                                                 help="Restart only what has FAILED."),
                url: str = UrlOption) -> None:
        """Restart a connector (and its tasks, or only the failed ones)."""
        flags = f"?includeTasks={str(include_tasks).lower()}&onlyFailed={str(only_failed).lower()}"
        _run(url, "POST", f"/connectors/{_q(name)}/restart{flags}")
        print(f"restart: {name}")

    @app.command("delete")
    def delete(name: str = NameArg, url: str = UrlOption) -> None:
        """Delete a connector (its offsets stay in Kafka)."""
        _run(url, "DELETE", f"/connectors/{_q(name)}")
        print(f"deleted: {name}")

    @app.command("offsets")
    def offsets(name: str = NameArg,
                alter: str | None = typer.Option(None, "--alter", metavar="FILE|-",
                                                 help="KIP-875 {\"offsets\": [...]} to write."),
                reset: bool = typer.Option(False, "--reset", help="Forget every offset."),
                fmt: str = FormatOption, url: str = UrlOption) -> None:
        """Show a connector's offsets, or alter or reset them (the connector must be stopped)."""
        check_format(fmt)
        if alter is not None and reset:
            usage("--alter and --reset exclude each other")
        if alter is not None or reset:
            body = (_run(url, "PATCH", f"/connectors/{_q(name)}/offsets", _read_config(alter))
                    if alter is not None else
                    _run(url, "DELETE", f"/connectors/{_q(name)}/offsets"))
            print(body["message"])
            return
        found = _run(url, "GET", f"/connectors/{_q(name)}/offsets")["offsets"]
        emit(["PARTITION", "OFFSET"], [[json.dumps(o["partition"], sort_keys=True),
                                        json.dumps(o["offset"], sort_keys=True)] for o in found],
             fmt)

    @app.command("plugins")
    def plugins(fmt: str = FormatOption, url: str = UrlOption) -> None:
        """The connector classes the worker offers (CLASS TYPE VERSION)."""
        check_format(fmt)
        found = _run(url, "GET", "/connector-plugins")
        emit(["CLASS", "TYPE", "VERSION"], [[p["class"], p["type"], p["version"]]
                                            for p in found], fmt)
