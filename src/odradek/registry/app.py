"""The REST API, as Confluent's registry documents it, over starlette."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from odradek.registry import errors
from odradek.registry.compat import check_pair
from odradek.registry.election import Election
from odradek.registry.protobuf import ProtoSchema
from odradek.registry.schemas import SCHEMA_TYPES, ParsedSchema
from odradek.registry.state import extras_of
from odradek.registry.store import KafkaStore

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPTED_TYPES = ("application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json",
                  "application/json", "application/octet-stream")
FORWARDED_HEADER = "X-Odradek-Forwarded"
MAX_BODY = 4 * 1024 * 1024  # bytes; a larger request body gets 413 without being read whole


def reply(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status_code=status, media_type=CONTENT_TYPE)


def error(err: errors.RegistryError) -> Response:
    return reply({"error_code": err.error_code, "message": err.message}, err.status)


def flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


def fmt(request: Request) -> str | None:
    """`format`: "serialized" asks for a Protobuf schema as a base64 FileDescriptorProto."""
    return request.query_params.get("format")


def schema_text(parsed: ParsedSchema, form: str | None) -> str:
    if form == "serialized" and isinstance(parsed.parsed, ProtoSchema):
        return parsed.parsed.serialized()
    return parsed.text


async def read_body(request: Request) -> bytes:
    if "body" in request.scope.get("state", {}):
        return bytes(request.scope["state"]["body"])
    ctype = request.headers.get("content-type", "application/json").split(";")[0].strip()
    if ctype and ctype not in ACCEPTED_TYPES:
        raise errors.RegistryError(415, f"Unsupported content type {ctype}", status=415)
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise errors.RegistryError(413, f"Request body over {MAX_BODY} bytes", status=413)
    request.scope.setdefault("state", {})["body"] = body
    return body


async def read_json(request: Request) -> dict[str, Any]:
    body = await read_body(request)
    try:
        obj = json.loads(body or b"{}")
    except ValueError as exc:
        raise errors.RegistryError(400, f"Unrecognized JSON: {exc}", status=400) from None
    if not isinstance(obj, dict):
        raise errors.RegistryError(400, "The request body must be a JSON object", status=400)
    return obj


class RegistryApp:
    def __init__(self, store: KafkaStore, election: Election | None = None) -> None:
        self.store = store
        self.election = election
        self.state = store.state
        # One write at a time: a write is planned from the view, appended, and applied before
        # the next one is planned, so ids and version numbers never collide.
        self.write_lock = asyncio.Lock()
        self.caught_up_term = -1

    async def _write(self, plan: Any, *args: Any, subject: str | None = None,
                     check_mode: bool = True) -> Any:
        async with self.write_lock:
            election = self.election
            if election is not None:
                # The last write may have been another instance's (a previous leader's): read
                # to the end once per leadership term, not before every write (a round trip).
                term = election.term
                if not (election.is_leader and term == self.caught_up_term):
                    await asyncio.to_thread(self.store.catch_up)
                    self.caught_up_term = term if election.is_leader else -1
            with self.store.lock:
                if check_mode:
                    self.state.check_writable(subject)
                result, recs = plan(*args)
            await asyncio.to_thread(self.store.write, recs)
            return result

    async def forwarded(self, request: Request) -> Response | None:
        """On a follower, the leader's answer to this write; None on the leader."""
        if self.election is None or self.election.is_leader:
            return None  # the leader answers itself, without a thread hop
        url = await asyncio.to_thread(self.election.wait_leader_url)
        if url is None:
            raise errors.RegistryError(errors.FORWARD_ERROR, "No leader elected yet", status=500)
        if url == self.election.url:
            return None
        if request.headers.get(FORWARDED_HEADER):
            raise errors.RegistryError(errors.FORWARD_ERROR,
                                       f"Forwarded to {self.election.url}, not the leader",
                                       status=500)
        body = await read_body(request)
        target = url + request.url.path + (f"?{request.url.query}" if request.url.query else "")
        status, data = await asyncio.to_thread(forward, request.method, target, body)
        if status < 300:
            # Read-your-writes on this instance too: apply the leader's records first.
            await asyncio.to_thread(self.store.catch_up)
        return Response(data, status_code=status, media_type=CONTENT_TYPE)

    # ---- subjects ---------------------------------------------------------------------------
    async def subjects(self, request: Request) -> Response:
        with self.store.lock:
            return reply(self.state.subject_names(flag(request, "deleted"),
                                                  request.query_params.get("subjectPrefix", ""),
                                                  flag(request, "deletedOnly")))

    async def schemas(self, request: Request) -> Response:
        """`GET /schemas`: registered schemas with subject and version, paged."""
        q = request.query_params
        try:
            offset = int(q.get("offset", "0"))
            limit = int(q.get("limit", "-1"))
        except ValueError:
            raise errors.RegistryError(400, "offset and limit are integers", status=400) from None
        with self.store.lock:
            found = self.state.listing(q.get("subjectPrefix", ""), flag(request, "deleted"),
                                       flag(request, "latestOnly"))
            page = found[max(offset, 0):] if limit < 0 else found[max(offset, 0):offset + limit]
            return reply([self.state.describe(v) for v in page])

    async def register(self, request: Request) -> Response:
        if (answer := await self.forwarded(request)) is not None:
            return answer
        subject = request.path_params["subject"]
        body = await read_json(request)
        with self.store.lock:
            normalize = flag(request, "normalize") or self.state.normalize_default(subject)
            parsed = self.state.parse_request(body, normalize)
        schema_id = await self._write(self.state.plan_register, subject, parsed,
                                      list(body.get("references") or []), normalize,
                                      body.get("id"), body.get("version"), subject=subject)
        return reply({"id": schema_id})

    async def lookup(self, request: Request) -> Response:
        subject = request.path_params["subject"]
        body = await read_json(request)
        with self.store.lock:
            normalize = flag(request, "normalize") or self.state.normalize_default(subject)
            parsed = self.state.parse_request(body, normalize)
            v = self.state.lookup(subject, parsed, flag(request, "deleted"), normalize)
            return reply(self.state.describe(v, fmt(request)))

    async def versions(self, request: Request) -> Response:
        with self.store.lock:
            subject = request.path_params["subject"]
            if flag(request, "deletedOnly"):
                found = [v for v in self.state.versions(subject, True) if v.deleted]
            else:
                found = self.state.versions(subject, flag(request, "deleted"))
            return reply([v.version for v in found])

    async def version(self, request: Request) -> Response:
        p = request.path_params
        with self.store.lock:
            v = self.state.version(p["subject"], p["version"], flag(request, "deleted"))
            return reply(self.state.describe(v, fmt(request)))

    async def version_schema(self, request: Request) -> Response:
        p = request.path_params
        with self.store.lock:
            v = self.state.version(p["subject"], p["version"], flag(request, "deleted"))
            text = schema_text(self.state.schemas[v.schema_id].parsed, fmt(request))
        return Response(text, media_type=CONTENT_TYPE)

    async def delete_subject(self, request: Request) -> Response:
        if (answer := await self.forwarded(request)) is not None:
            return answer
        subject = request.path_params["subject"]
        deleted = await self._write(self.state.plan_delete_subject, subject,
                                    flag(request, "permanent"), subject=subject)
        return reply(deleted)

    async def delete_version(self, request: Request) -> Response:
        if (answer := await self.forwarded(request)) is not None:
            return answer
        p = request.path_params
        number = await self._write(self.state.plan_delete_version, p["subject"], p["version"],
                                   flag(request, "permanent"), subject=p["subject"])
        return reply(number)

    # ---- schemas by id ----------------------------------------------------------------------
    def _schema(self, request: Request) -> Any:
        try:
            schema_id = int(request.path_params["id"])
        except ValueError:
            raise errors.schema_not_found() from None
        stored = self.state.schemas.get(schema_id)
        if stored is None:
            raise errors.schema_not_found()
        return stored

    async def schema_by_id(self, request: Request) -> Response:
        with self.store.lock:
            stored = self._schema(request)
            out: dict[str, Any] = {"schema": schema_text(stored.parsed, fmt(request))}
            if stored.parsed.schema_type != "AVRO":
                out["schemaType"] = stored.parsed.schema_type
            out.update(extras_of(stored))
        return reply(out)

    async def schema_text_by_id(self, request: Request) -> Response:
        with self.store.lock:
            text = schema_text(self._schema(request).parsed, fmt(request))
        return Response(text, media_type=CONTENT_TYPE)

    def _uses(self, schema_id: int, deleted: bool) -> list[Any]:
        return [v for s in sorted(self.state.subjects) for _, v in
                sorted(self.state.subjects[s].items())
                if v.schema_id == schema_id and (deleted or not v.deleted)]

    async def schema_subjects(self, request: Request) -> Response:
        with self.store.lock:
            stored = self._schema(request)
            uses = self._uses(stored.schema_id, flag(request, "deleted"))
        return reply(sorted({v.subject for v in uses}))

    async def schema_versions(self, request: Request) -> Response:
        with self.store.lock:
            stored = self._schema(request)
            uses = self._uses(stored.schema_id, flag(request, "deleted"))
        return reply([{"subject": v.subject, "version": v.version} for v in uses])

    async def schema_types(self, request: Request) -> Response:
        return reply(list(SCHEMA_TYPES))

    # ---- config and compatibility -----------------------------------------------------------
    async def get_config(self, request: Request) -> Response:
        subject = request.path_params.get("subject")
        with self.store.lock:
            if subject is not None and subject not in self.state.configs \
                    and not flag(request, "defaultToGlobal"):
                raise errors.RegistryError(
                    errors.SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED,
                    f"Subject '{subject}' does not have subject-level compatibility configured")
            out: dict[str, Any] = {"compatibilityLevel": self.state.level(subject)}
            if self.state.normalize_default(subject):
                out["normalize"] = True
            return reply(out)

    async def put_config(self, request: Request) -> Response:
        if (answer := await self.forwarded(request)) is not None:
            return answer
        body = await read_json(request)
        subject = request.path_params.get("subject")
        answer = await self._write(self.state.plan_config, subject, body.get("compatibility"),
                                   body.get("normalize"), subject=subject)
        return reply(answer)

    async def delete_config(self, request: Request) -> Response:
        if (answer := await self.forwarded(request)) is not None:
            return answer
        subject = request.path_params["subject"]
        from odradek.registry.records import config_key

        with self.store.lock:
            if subject not in self.state.configs:
                raise errors.subject_not_found(subject)
            level = self.state.level(subject)
        await self._write(lambda: (None, [(config_key(subject), None)]))
        return reply({"compatibilityLevel": level})

    async def compatibility(self, request: Request) -> Response:
        p = request.path_params
        body = await read_json(request)
        with self.store.lock:
            parsed = self.state.parse_request(body)
            level = self.state.level(p["subject"])
            if "version" in p:
                olds = [self.state.version(p["subject"], p["version"])]
            else:
                olds = self.state.versions(p["subject"])
                if not level.endswith("_TRANSITIVE"):
                    olds = olds[-1:]
            reasons = [r for v in olds for r in
                       check_pair(level, parsed, self.state.schemas[v.schema_id].parsed)]
        out: dict[str, Any] = {"is_compatible": not reasons}
        if flag(request, "verbose"):
            out["messages"] = reasons
        return reply(out)

    async def referenced_by(self, request: Request) -> Response:
        p = request.path_params
        with self.store.lock:
            return reply(self.state.referenced_by(p["subject"], p["version"]))

    async def get_mode(self, request: Request) -> Response:
        with self.store.lock:
            return reply({"mode": self.state.mode(request.path_params.get("subject"))})

    async def put_mode(self, request: Request) -> Response:
        if (answer := await self.forwarded(request)) is not None:
            return answer
        body = await read_json(request)
        mode = await self._write(self.state.plan_mode, request.path_params.get("subject"),
                                 body.get("mode"), flag(request, "force"), check_mode=False)
        return reply({"mode": mode})

    async def delete_mode(self, request: Request) -> Response:
        if (answer := await self.forwarded(request)) is not None:
            return answer
        mode = await self._write(self.state.plan_delete_mode, request.path_params["subject"],
                                 check_mode=False)
        return reply({"mode": mode})

    async def root(self, request: Request) -> Response:
        return reply({})


async def _registry_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, errors.RegistryError)
    return error(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return reply({"error_code": exc.status_code, "message": f"HTTP {exc.status_code} {exc.detail}"},
                 exc.status_code)


async def _unexpected(request: Request, exc: Exception) -> Response:
    return error(errors.RegistryError(errors.STORE_ERROR, f"Internal error: {exc}", status=500))


def forward(method: str, url: str, body: bytes) -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, data=body or None, method=method, headers={
        "Content-Type": CONTENT_TYPE, FORWARDED_HEADER: "1"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError as exc:
        raise errors.RegistryError(errors.FORWARD_ERROR, f"Error forwarding to the leader {url}: "
                                   f"{exc}", status=500) from None


def build_app(store: KafkaStore, election: Election | None = None) -> Starlette:
    api = RegistryApp(store, election)
    routes = [
        Route("/", api.root, methods=["GET"]),
        Route("/subjects", api.subjects, methods=["GET"]),
        Route("/subjects/{subject:path}/versions", api.register, methods=["POST"]),
        Route("/subjects/{subject:path}/versions", api.versions, methods=["GET"]),
        Route("/subjects/{subject:path}/versions/{version:str}/schema", api.version_schema,
              methods=["GET"]),
        Route("/subjects/{subject:path}/versions/{version:str}/referencedby", api.referenced_by,
              methods=["GET"]),
        Route("/subjects/{subject:path}/versions/{version:str}", api.version, methods=["GET"]),
        Route("/subjects/{subject:path}/versions/{version:str}", api.delete_version,
              methods=["DELETE"]),
        Route("/subjects/{subject:path}", api.lookup, methods=["POST"]),
        Route("/subjects/{subject:path}", api.delete_subject, methods=["DELETE"]),
        Route("/schemas", api.schemas, methods=["GET"]),
        Route("/schemas/types", api.schema_types, methods=["GET"]),
        Route("/schemas/ids/{id:str}", api.schema_by_id, methods=["GET"]),
        Route("/schemas/ids/{id:str}/schema", api.schema_text_by_id, methods=["GET"]),
        Route("/schemas/ids/{id:str}/subjects", api.schema_subjects, methods=["GET"]),
        Route("/schemas/ids/{id:str}/versions", api.schema_versions, methods=["GET"]),
        Route("/config", api.get_config, methods=["GET"]),
        Route("/config", api.put_config, methods=["PUT"]),
        Route("/config/{subject:path}", api.get_config, methods=["GET"]),
        Route("/config/{subject:path}", api.put_config, methods=["PUT"]),
        Route("/config/{subject:path}", api.delete_config, methods=["DELETE"]),
        Route("/mode", api.get_mode, methods=["GET"]),
        Route("/mode", api.put_mode, methods=["PUT"]),
        Route("/mode/{subject:path}", api.get_mode, methods=["GET"]),
        Route("/mode/{subject:path}", api.put_mode, methods=["PUT"]),
        Route("/mode/{subject:path}", api.delete_mode, methods=["DELETE"]),
        Route("/compatibility/subjects/{subject:path}/versions/{version:str}", api.compatibility,
              methods=["POST"]),
        Route("/compatibility/subjects/{subject:path}/versions", api.compatibility,
              methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers={
        errors.RegistryError: _registry_error, HTTPException: _http_error,
        Exception: _unexpected})
