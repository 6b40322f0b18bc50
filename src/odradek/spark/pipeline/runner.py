"""Run a loaded pipeline: declare its sources and views, start its flows, wait for them.

Three phases, so a bad definition fails before anything is written: load the files
(syntax), build every DataFrame and writer (options, names, SQL analysis), then start.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from odradek.spark.options import parse_sink
from odradek.spark.pipeline.logs import DEFAULT_LEVEL, log_conf
from odradek.spark.pipeline.model import (
    Flow,
    Hook,
    Pipeline,
    PipelineError,
    Source,
    Statement,
    View,
)
from odradek.spark.pipeline.options import output_mode, sink_options, source_options, with_bootstrap
from odradek.spark.pipeline.progress import Progress
from odradek.spark.session import session, worker_python
from odradek.spark.sink import check_columns

LOG = logging.getLogger("odradek.spark.pipeline")

DEFAULT_CONF = {
    "spark.driver.memory": "640m",
    "spark.executor.memory": "512m",
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.stopTimeout": "30s",
    # (the Python workers' connect-back timeout is session.PYTHON_WORKERS, which every
    # odradek session gets)
}


@dataclass
class RunOptions:
    master: str = "local[2]"
    bootstrap: str | None = None
    checkpoint_dir: Path = Path("checkpoints")
    available_now: bool = True
    trigger_interval: str | None = None
    conf: dict[str, str] = field(default_factory=dict)
    variables: dict[str, str] = field(default_factory=dict)
    app_name: str = "odradek-pipeline"
    spark_log_level: str = DEFAULT_LEVEL  # one of logs.LEVELS
    # Kafka client settings (TLS, SASL) every source and flow gets as kafka.* options
    client: dict[str, str] = field(default_factory=dict)


@dataclass
class Context:
    """What a module's build(spark, ctx) gets: where to checkpoint, how to trigger."""

    spark: SparkSession
    bootstrap: str | None
    checkpoint_dir: Path
    available_now: bool
    trigger_interval: str | None
    variables: Mapping[str, str]
    client: Mapping[str, str] = field(default_factory=dict)

    def kafka_options(self) -> dict[str, str]:
        """The run's bootstrap and client settings (-X, --command-config) as kafka.* options,
        for a build() that reads or writes a topic itself: .options(**ctx.kafka_options())."""
        return with_bootstrap({}, self.bootstrap, self.client)

    def checkpoint(self, name: str) -> str:
        return str(self.checkpoint_dir / name)

    def trigger(self) -> dict[str, Any]:
        """Keyword arguments for DataStreamWriter.trigger(**ctx.trigger())."""
        if self.available_now:
            return {"availableNow": True}
        return {"processingTime": self.trigger_interval or "0 seconds"}

    def var(self, name: str, default: str | None = None) -> str:
        if name in self.variables:
            return self.variables[name]
        if default is None:
            raise PipelineError(f"unknown variable '{name}' (set it with --var {name}=VALUE)")
        return default


def make_session(opts: RunOptions, log_dir: Path | None = None) -> SparkSession:
    # Python workers, on this machine or a cluster's, must run this interpreter's installation
    # (it has odradek), started through its launcher (session.worker_python: the installed
    # pyspark, not the bundled zip each worker would compile again).
    workers = worker_python()
    os.environ["PYSPARK_PYTHON"] = workers
    os.environ["PYSPARK_DRIVER_PYTHON"] = workers  # the JVM's own Python processes (session.py)
    conf = {**DEFAULT_CONF, "spark.pyspark.python": workers,
            "spark.executorEnv.PYSPARK_PYTHON": workers}
    # Pipeline files may import helpers next to them or from the working directory.
    path = os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH", "")) if p)
    conf["spark.executorEnv.PYTHONPATH"] = path
    conf.update(opts.conf)
    conf.update(log_conf(opts.spark_log_level, conf, log_dir))
    spark = session(opts.master, opts.app_name, conf)
    # The log4j2 file sets the level from the JVM's start; this also covers a JVM that was
    # already running (a session made earlier in this process) or a user's own log4j2 file.
    spark.sparkContext.setLogLevel(opts.spark_log_level)
    return spark


def brief(exc: BaseException) -> str:
    """The useful part of a Spark or Python error: the option error if there is one."""
    text = str(exc)
    for line in text.splitlines():
        if "OptionError:" in line:
            return line.split("OptionError:", 1)[1].strip()
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("JVM stacktrace")]
    return "\n".join(lines[:12])


def _guard(where: str, what: str, action: Callable[[], Any]) -> Any:
    try:
        return action()
    except PipelineError:
        raise
    except Exception as e:
        raise PipelineError(f"{where}: {what}: {brief(e)}") from None


@dataclass
class Prepared:
    writers: list[tuple[Flow, DataStreamWriter]]
    hooks: list[Hook]
    # Rows each foreachBatch flow wrote, per batch id: that sink reports no output count.
    output_rows: dict[str, dict[int, int]] = field(default_factory=dict)


def prepare(spark: SparkSession, pipeline: Pipeline, opts: RunOptions) -> Prepared:
    """Every source, view and flow defined in the session; nothing started yet."""
    writers: list[tuple[Flow, DataStreamWriter]] = []
    hooks: list[Hook] = []
    output_rows: dict[str, dict[int, int]] = {}
    for el in pipeline.elements:
        if isinstance(el, Source):
            options = source_options(el.name, el.where, el.options, opts.bootstrap, opts.client)
            df = _guard(el.where, f"source '{el.name}'",
                        lambda o=options: spark.readStream.format("odradek").options(**o).load())
            df.createOrReplaceTempView(el.name)
        elif isinstance(el, View):
            df = _guard(el.where, f"view '{el.name}'", lambda e=el: _dataframe(e.build, spark))
            df.createOrReplaceTempView(el.name)
        elif isinstance(el, Statement):
            _guard(el.where, "statement", lambda e=el: spark.sql(e.sql))
        elif isinstance(el, Flow):
            writers.append((el, _writer(spark, el, opts, output_rows)))
        else:
            hooks.append(el)
    return Prepared(writers, hooks, output_rows)


def _dataframe(build: Callable[[Any], Any] | None, spark: SparkSession) -> DataFrame:
    assert build is not None
    df = build(spark)
    if not isinstance(df, DataFrame):
        raise TypeError(f"returned {type(df).__name__}, not a DataFrame")
    return df


def _writer(spark: SparkSession, flow: Flow, opts: RunOptions,
            output_rows: dict[str, dict[int, int]]) -> DataStreamWriter:
    what = f"flow '{flow.name}'"
    mode = output_mode(flow.name, flow.where, flow.output_mode)
    sink = sink_options(flow.name, flow.where, flow.options, opts.bootstrap, opts.client)
    if flow.sql is not None:
        df = _guard(flow.where, what, lambda: spark.sql(flow.sql))
    else:
        df = _guard(flow.where, what, lambda: _dataframe(flow.build, spark))
    if not df.isStreaming:
        raise PipelineError(f"{flow.where}: {what}: the query reads no source (a flow reads a "
                            f"CREATE SOURCE / source() view, so it is a stream)")
    # The sink's own column rules, checked now: an update flow's writer runs only per batch.
    _guard(flow.where, what, lambda: check_columns(df.schema, parse_sink(sink, exactly_once_available=True)))
    writer = df.writeStream.outputMode(mode).queryName(flow.name).option(
        "checkpointLocation", str(opts.checkpoint_dir / flow.name))
    if mode == "append":
        writer = writer.format("odradek").options(**sink)
    else:
        # A Python data source sink takes appends only ("does not support Update mode"), so an
        # update/complete flow writes each micro-batch's changed rows with the batch sink.
        writer = writer.foreachBatch(_batch_writer(sink, output_rows.setdefault(flow.name, {})))
    if opts.available_now:
        writer = writer.trigger(availableNow=True)
    elif opts.trigger_interval:
        writer = writer.trigger(processingTime=opts.trigger_interval)
    return writer


def _batch_writer(sink: Mapping[str, str], counts: dict[int, int]) -> Callable[[DataFrame, int], None]:
    """foreachBatch runs this in the driver's Python process, so `counts` is the runner's own."""
    def write(batch: DataFrame, batch_id: int) -> None:
        # Cached, so counting for the progress line does not run the batch's plan twice.
        batch.persist()
        try:
            counts[batch_id] = batch.count()
            batch.write.format("odradek").options(**sink).mode("append").save()
        finally:
            batch.unpersist()
    return write


def start(spark: SparkSession, prepared: Prepared, opts: RunOptions) -> list[Running]:
    started: list[Running] = []
    try:
        for flow, writer in prepared.writers:
            query = _guard(flow.where, f"flow '{flow.name}'", writer.start)
            started.append(Running(flow.name, query, writer))
            _settle(query)
        ctx = Context(spark, opts.bootstrap, opts.checkpoint_dir, opts.available_now,
                      opts.trigger_interval, opts.variables, opts.client)
        for hook in prepared.hooks:
            result = _guard(hook.where, hook.name, lambda h=hook: h.build(spark, ctx))
            started.extend(Running(f"{hook.name}[{q.name or i}]", q, None)
                           for i, q in enumerate(_queries(hook, result)))
    except BaseException:
        stop_all(started)
        raise
    return started


def _settle(query: StreamingQuery, limit: float = 60.0) -> None:
    """Wait until a query has set up its sources before starting the next.

    Each Python source starts a Python worker on the driver that must connect back to the
    JVM within 10 s (fixed in Spark); starting every flow at once on a busy machine misses it.
    """
    deadline = time.monotonic() + limit
    while query.isActive and time.monotonic() < deadline:
        if not str(query.status.get("message", "")).startswith("Initializing"):
            return
        time.sleep(0.2)


def _queries(hook: Hook, result: object) -> list[StreamingQuery]:
    items = [result] if isinstance(result, StreamingQuery) else list(result or [])  # type: ignore[call-overload]
    if not all(isinstance(q, StreamingQuery) for q in items):
        raise PipelineError(f"{hook.where}: {hook.name} must return a StreamingQuery or a list of them")
    return items


@dataclass
class Running:
    name: str
    query: StreamingQuery
    writer: DataStreamWriter | None  # to restart it from its checkpoint; None for a hook's query
    restarts: int = 0


RESTARTS = 5
TRANSIENT = ("Python worker failed to connect back",)


def stop_all(queries: Iterable[Running]) -> None:
    for r in queries:
        try:
            r.query.stop()
        except Exception as e:  # keep stopping the others
            LOG.warning("stopping %s: %s", r.name, brief(e))


class Stopper:
    """SIGINT/SIGTERM ask the wait loop to stop the queries; a second signal exits at once."""

    def __init__(self) -> None:
        self.requested = threading.Event()

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.requested.is_set():
            raise SystemExit(128 + signum)
        self.requested.set()


def wait(queries: list[Running], stopper: Stopper, report: Callable[[str], None],
         error: Callable[[str], None] | None = None,
         output_rows: Mapping[str, Mapping[int, int]] | None = None) -> int:
    """Until every query ends (AvailableNow) or a stop is asked; 1 if a query failed.

    Between waits, each query's new micro-batches are reported, one line each."""
    error = error or report
    progress = Progress(report, output_rows or {})
    active = list(queries)
    while active:
        for q in active:
            progress.poll(q.name, q.query)
        if stopper.requested.is_set():
            report("stopping: signal received")
            stop_all(active)
            for q in active:
                progress.poll(q.name, q.query)
                report(f"flow '{q.name}' stopped: {progress.summary(q.name)}")
            return 0
        r = active[0]
        try:
            ended = r.query.awaitTermination(0.5)
            err = r.query.exception() if ended is not False else None
        except Exception as e:  # awaitTermination raises the query's own failure
            ended, err = True, e
        if ended is False:
            active = active[1:] + active[:1]
            continue
        active.pop(0)
        progress.poll(r.name, r.query)  # its last batches, before it is called finished
        if err is not None and r.writer is not None and r.restarts < RESTARTS \
                and any(t in str(err) for t in TRANSIENT):
            # A start-up timeout, not a data problem: the checkpoint makes a restart safe.
            error(f"flow '{r.name}' failed to start ({brief(err).splitlines()[0]}); restarting")
            time.sleep(2.0 * (r.restarts + 1))
            active.append(Running(r.name, r.writer.start(), r.writer, r.restarts + 1))
            continue
        if err is not None:
            error(f"flow '{r.name}' failed: {brief(err)}")
            stop_all(active)
            return 1
        report(f"flow '{r.name}' finished: {progress.summary(r.name)}")
    return 0


def run(path: Path, opts: RunOptions, report: Callable[[str], None] = print,
        error: Callable[[str], None] | None = None) -> int:
    """Load, prepare and start the pipeline, then wait; `report` gets progress and status
    lines, `error` (default: `report`) a flow's failure."""
    from odradek.spark.pipeline.load import load

    for p in (str(Path(path).resolve().parent if Path(path).is_file() else Path(path).resolve()), os.getcwd()):
        if p not in sys.path:
            sys.path.append(p)
    pipeline = load(Path(path), opts.variables)
    stopper = Stopper()
    stopper.install()
    with tempfile.TemporaryDirectory(prefix="odradek-spark-log-") as log_dir:
        spark = make_session(opts, Path(log_dir))
        try:
            prepared = prepare(spark, pipeline, opts)
            queries = start(spark, prepared, opts)
            report(f"started {len(queries)} flow(s): {', '.join(r.name for r in queries)}")
            return wait(queries, stopper, report, error, prepared.output_rows)
        finally:
            spark.stop()
