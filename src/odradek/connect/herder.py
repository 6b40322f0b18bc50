"""The operations of Connect's REST API over the store (Kafka's DistributedHerder's job,
without HTTP): configs are validated by their plugin and written to connect-configs with their
task configs and commit record; the worker picks them up from there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from odradek import __version__ as odradek_version
from odradek.connect import records, sink_offsets
from odradek.connect.cluster import Cluster
from odradek.connect.errors import ConnectError, bad_request, conflict, not_found
from odradek.connect.plugins import Plugins
from odradek.connect.store import ConnectStore

INITIAL_STATES = {"RUNNING": "STARTED", "PAUSED": "PAUSED", "STOPPED": "STOPPED"}


class Herder:
    def __init__(self, store: ConnectStore, plugins: Plugins, cluster: Cluster,
                 wake: Callable[[], None] = lambda: None) -> None:
        self.store = store
        self.plugins = plugins
        self.cluster = cluster
        self.wake = wake

    # ---- reads ------------------------------------------------------------------------------
    def server_info(self) -> dict[str, Any]:
        return {"version": odradek_version, "commit": "unknown",
                "kafka_cluster_id": self.store.cluster_id}

    def names(self) -> list[str]:
        with self.store.lock:
            return sorted(self.store.configs.connectors)

    def _config(self, name: str) -> dict[str, str]:
        with self.store.lock:
            config = self.store.configs.connectors.get(name)
        if config is None:
            raise not_found(name)
        return dict(config)

    def _type(self, config: dict[str, str]) -> str:
        plugin = self.plugins.find(config.get("connector.class", ""))
        return plugin.type if plugin is not None else "unknown"

    def info(self, name: str) -> dict[str, Any]:
        config = self._config(name)
        with self.store.lock:
            count = len(self.store.configs.task_configs.get(name, []))
        return {"name": name, "config": config,
                "tasks": [{"connector": name, "task": n} for n in range(count)],
                "type": self._type(config)}

    def config(self, name: str) -> dict[str, str]:
        return self._config(name)

    def tasks(self, name: str) -> list[dict[str, Any]]:
        self._config(name)
        with self.store.lock:
            configs = list(self.store.configs.task_configs.get(name, []))
        return [{"id": {"connector": name, "task": n}, "config": dict(c)}
                for n, c in enumerate(configs)]

    def status(self, name: str) -> dict[str, Any]:
        config = self._config(name)
        with self.store.lock:
            conn = self.store.status.connectors.get(name)
            count = len(self.store.configs.task_configs.get(name, []))
            tasks = dict(self.store.status.tasks.get(name, {}))
        if conn is None:
            raise ConnectError(404, f"No status found for connector {name}")
        return {"name": name, "connector": _public(conn),
                "tasks": [{"id": n, **_public(tasks[n])} for n in range(count) if n in tasks],
                "type": self._type(config)}

    def task_status(self, name: str, task: int) -> dict[str, Any]:
        self._config(name)
        with self.store.lock:
            status = self.store.status.tasks.get(name, {}).get(task)
            count = len(self.store.configs.task_configs.get(name, []))
        if status is None or task >= count:
            raise ConnectError(404, f"No status found for task {name}-{task}")
        return {"id": task, **_public(status)}

    # ---- writes -----------------------------------------------------------------------------
    def _checked(self, name: str, config: dict[str, Any]) -> dict[str, str]:
        if not isinstance(config, dict):
            raise bad_request("Connector configuration must be a JSON object")
        props = {str(k): str(v) for k, v in config.items() if v is not None}
        if "name" in props and props["name"] != name:
            raise bad_request(f"Connector name configuration ({props['name']}) doesn't match "
                              f"connector name in the URL ({name})")
        props["name"] = name
        validation = self.plugins.validate(props)
        if validation.error_count():
            raise bad_request(validation.message())
        return props

    def _write(self, name: str, props: dict[str, str], target: str | None) -> None:
        plugin = self.plugins.find(props["connector.class"])
        assert plugin is not None
        state = target or self.store.configs.target_state(name)
        tasks = ([] if state == "STOPPED"
                 else plugin.task_configs(props, int(props.get("tasks.max", "1"))))
        items: list[tuple[str, dict[str, Any] | None]] = []
        if target is not None:
            items.append((records.target_state_key(name), records.target_state_value(target)))
        items.append((records.connector_key(name), records.properties_value(props)))
        items += [(records.task_key(name, n), records.properties_value(t))
                  for n, t in enumerate(tasks)]
        items.append((records.commit_key(name), records.commit_value(len(tasks))))
        self.store.write_config(items)
        self.wake()

    def create(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise bad_request("Request body must be a JSON object")
        name = body.get("name")
        config = body.get("config")
        if not isinstance(name, str) or not name.strip():
            raise bad_request("Connector name is required")
        if config is None:
            raise bad_request("Connector config is required")
        initial = body.get("initial_state")
        if initial is not None and initial not in INITIAL_STATES:
            raise bad_request(f"Invalid initial state {initial!r}: must be one of "
                              f"{', '.join(INITIAL_STATES)}")
        name = name.strip()
        props = self._checked(name, config)
        self.store.read_to_end()
        if name in self.names():
            raise conflict(f"Connector {name} already exists")
        self._write(name, props, INITIAL_STATES.get(initial or "RUNNING"))
        return self.info(name)

    def put_config(self, name: str, config: Any) -> tuple[bool, dict[str, Any]]:
        """(created, info)."""
        props = self._checked(name, config)
        self.store.read_to_end()
        created = name not in self.names()
        self._write(name, props, "STARTED" if created else None)
        return created, self.info(name)

    def delete(self, name: str) -> None:
        self._config(name)
        self.store.write_config([(records.connector_key(name), None),
                                 (records.target_state_key(name), None)])
        self.wake()

    def set_target(self, name: str, target: str) -> None:
        config = self._config(name)
        if target == "STOPPED":
            # Stopping empties the task configs (KIP-875): nothing may run until resumed.
            self.store.write_config([(records.target_state_key(name),
                                      records.target_state_value(target)),
                                     (records.commit_key(name), records.commit_value(0))])
        elif self.store.configs.target_state(name) == "STOPPED":
            self._write(name, config, target)  # resuming regenerates the tasks
        else:
            self.store.write_config([(records.target_state_key(name),
                                      records.target_state_value(target))])
        self.wake()

    def restart(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any]:
        status = self.status(name)
        self.store.write_config([(records.restart_key(name),
                                  records.restart_value(include_tasks, only_failed))])
        self.wake()
        # The answer shows what is being restarted as RESTARTING (Kafka's 202 body).
        conn = status["connector"]
        if not only_failed or conn["state"] == "FAILED":
            conn["state"] = "RESTARTING"
        for task in status["tasks"]:
            if include_tasks and (not only_failed or task["state"] == "FAILED"):
                task["state"] = "RESTARTING"
        return status

    def restart_task(self, name: str, task: int) -> None:
        self.task_status(name, task)
        # The tasks of a connector are the partitions of one Spark query: restarting one
        # restarts the query.
        self.store.write_config([(records.restart_key(name),
                                  records.restart_value(True, False))])
        self.wake()

    # ---- offsets (KIP-875) ------------------------------------------------------------------
    def offsets(self, name: str) -> dict[str, Any]:
        config = self._config(name)
        if self._type(config) == "sink":
            return {"offsets": sink_offsets.as_rest(sink_offsets.read(self.cluster, name))}
        return {"offsets": [{"partition": p, "offset": o}
                            for p, o in self.store.snapshot_offsets(name)]}

    def _must_be_stopped(self, name: str) -> dict[str, str]:
        config = self._config(name)
        self.store.read_to_end()
        with self.store.lock:
            stopped = (self.store.configs.target_state(name) == "STOPPED"
                       and not self.store.configs.task_configs.get(name))
        if not stopped:
            raise bad_request(
                "Connectors must be in the STOPPED state before their offsets can be modified. "
                "This can be done for the specified connector by issuing a 'PUT' request to the "
                f"'/connectors/{name}/stop' endpoint")
        return config

    def alter_offsets(self, name: str, body: Any) -> dict[str, str]:
        config = self._must_be_stopped(name)
        entries = body.get("offsets") if isinstance(body, dict) else None
        if not isinstance(entries, list) or not entries:
            raise bad_request("Offsets to alter must be given as a non-empty 'offsets' list")
        plugin = self.plugins.find(config.get("connector.class", ""))
        if plugin is None:
            raise bad_request(f"Connector class {config.get('connector.class')} is not available")
        if plugin.type == "sink":
            try:
                parsed = [sink_offsets.parse_rest(e.get("partition"), e.get("offset"))
                          for e in entries if isinstance(e, dict)]
            except ValueError as exc:
                raise bad_request(str(exc)) from None
            if len(parsed) != len(entries):
                raise bad_request("Each entry of 'offsets' must be a JSON object")
            sink_offsets.write(self.cluster, name, _nested(
                [(t, p, o) for t, p, o in parsed if o is not None]))
            sink_offsets.delete(self.cluster, name,
                                [(t, p) for t, p, o in parsed if o is None])
        else:
            items = []
            for entry in entries:
                part = entry.get("partition") if isinstance(entry, dict) else None
                off = entry.get("offset") if isinstance(entry, dict) else None
                if not isinstance(part, dict) or not (off is None or isinstance(off, dict)):
                    raise bad_request("Each entry needs a 'partition' object and an 'offset' "
                                      "object or null")
                errors = plugin.offset_errors(part, off)
                if errors:
                    raise bad_request(errors[0])
                items.append((part, off))
            self.store.write_offsets(name, items)
        return {"message": "The offsets for this connector have been altered successfully"}

    def reset_offsets(self, name: str) -> dict[str, str]:
        config = self._must_be_stopped(name)
        if self._type(config) == "sink":
            sink_offsets.reset(self.cluster, name)
        else:
            self.store.write_offsets(name, [(p, None) for p, _ in self.store.snapshot_offsets(name)])
        return {"message": "The offsets for this connector have been reset successfully"}

    # ---- plugins ----------------------------------------------------------------------------
    def plugin_list(self) -> list[dict[str, str]]:
        return [p.info() for p in self.plugins.plugins]

    def validate(self, plugin_name: str, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise bad_request("Connector configuration must be a JSON object")
        props = {str(k): str(v) for k, v in body.items() if v is not None}
        plugin = self.plugins.find(plugin_name)
        if plugin is None:
            raise bad_request(f"Failed to find any class that implements Connector and which "
                              f"name matches {plugin_name}")
        cls = props.get("connector.class")
        if cls is not None and self.plugins.find(cls) is not plugin:
            raise bad_request("Included connector type " + cls + " does not match request "
                              "type " + plugin_name)
        props.setdefault("connector.class", plugin.class_name)
        return plugin.validate(props).body()

    def plugin_config(self, plugin_name: str) -> list[dict[str, Any]]:
        plugin = self.plugins.find(plugin_name)
        if plugin is None:
            raise ConnectError(404, f"Unknown plugin {plugin_name}.")
        return [f.definition(n) for n, f in enumerate(plugin.all_fields(), start=1)]


def _public(status: dict[str, Any]) -> dict[str, Any]:
    out = {"state": status.get("state"), "worker_id": status.get("worker_id")}
    if status.get("trace"):
        out["trace"] = status["trace"]
    return out


def _nested(items: list[tuple[str, int, int | None]]) -> dict[str, dict[int, int]]:
    out: dict[str, dict[int, int]] = {}
    for topic, part, off in items:
        if off is not None:
            out.setdefault(topic, {})[part] = off
    return out
