"""Spark's log level for `odradek pipeline run`: WARN unless the user asks for another.

`sc.setLogLevel` acts only once the JVM runs, after the start-up lines were printed, so the
driver JVM also gets a log4j2 configuration file (through spark.driver.extraJavaOptions, which
spark-submit applies when it launches the JVM) with the same level from its first line.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

LEVELS = ("OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE", "ALL")
DEFAULT_LEVEL = "WARN"
JAVA_OPTIONS = "spark.driver.extraJavaOptions"

# Warnings a pipeline user can do nothing about: shown again with a more verbose level.
QUIET_AT_WARN = (
    "org.apache.hadoop.util.NativeCodeLoader",  # no native Hadoop library: Java's is used
)
SHELL_LOGGERS = ("org.apache.spark.api.python.PythonGatewayServer",)  # the PySpark driver's JVM entry
# Said for every streaming query (adaptive execution does not apply to streaming plans).
NOISE_AT_WARN = r".*(spark\\.sql\\.adaptive\\.enabled is not supported in streaming|Disabling AQE since).*"


def check_level(level: str) -> str:
    name = level.strip().upper()
    if name not in LEVELS:
        raise ValueError(f"unknown Spark log level {level!r} (one of {', '.join(LEVELS)})")
    return name


def log4j2_properties(level: str) -> str:
    # Failures are reported by the runner in a line or a few; at WARN and less verbose levels
    # Spark's own ERROR lines keep only their first trace line instead of 100-line traces.
    verbose = level in ("INFO", "DEBUG", "TRACE", "ALL")
    trace = "%ex" if verbose else "%ex{short}"
    lines = [
        f"rootLogger.level = {level.lower()}",
        "rootLogger.appenderRef.stderr.ref = console",
        "appender.console.type = Console",
        "appender.console.name = console",
        "appender.console.target = SYSTEM_ERR",
        "appender.console.layout.type = PatternLayout",
        f"appender.console.layout.pattern = %d{{HH:mm:ss}} spark %p %c{{1}}: %m%n{trace}",
    ]
    # Spark treats a PySpark driver as a shell: at start-up it filters the console at the level
    # of the logger of the class that set logging up (WARN when that logger has no level of
    # its own), which would hide a more verbose level.
    for i, name in enumerate(SHELL_LOGGERS):
        lines += [f"logger.shell{i}.name = {name}", f"logger.shell{i}.level = {level.lower()}"]
    if level == "WARN":
        for i, name in enumerate(QUIET_AT_WARN):
            lines += [f"logger.quiet{i}.name = {name}", f"logger.quiet{i}.level = error"]
        lines += [
            "appender.console.filter.noise.type = RegexFilter",
            f"appender.console.filter.noise.regex = {NOISE_AT_WARN}",
            "appender.console.filter.noise.onMatch = DENY",
            "appender.console.filter.noise.onMismatch = NEUTRAL",
        ]
    return "\n".join(lines) + "\n"


def log_conf(level: str, conf: Mapping[str, str], directory: Path | None = None) -> dict[str, str]:
    """The Spark settings that give the driver JVM this log level from its start.

    A user's own log4j2 file (-Dlog4j2.configurationFile in their --conf) wins."""
    current = conf.get(JAVA_OPTIONS, "")
    if "log4j2.configurationFile" in current:
        return {}
    where = Path(directory or tempfile.mkdtemp(prefix="odradek-spark-log-"))
    path = where / "log4j2.properties"
    path.write_text(log4j2_properties(level))
    option = f"-Dlog4j2.configurationFile={path.as_uri()}"
    return {JAVA_OPTIONS: f"{current} {option}".strip()}
