"""Run the real `odradek` command as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys

ODRADEK = [sys.executable, "-m", "odradek.cli.main"]


def odradek(*args: str, bootstrap: str | None = None, input: bytes | str | None = None,
            env: dict[str, str] | None = None, timeout: float = 120,
            ) -> subprocess.CompletedProcess[str]:
    cmd = [*ODRADEK, *args]
    if bootstrap is not None:
        cmd += ["-b", bootstrap]
    data = input.encode() if isinstance(input, str) else input
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    proc = subprocess.run(cmd, input=data, capture_output=True, timeout=timeout, env=full_env)
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode("utf-8", "surrogateescape"),
        proc.stderr.decode("utf-8", "replace"))


def ok(*args: str, **kwargs: object) -> str:
    res = odradek(*args, **kwargs)  # type: ignore[arg-type]
    assert res.returncode == 0, f"odradek {' '.join(args)} exited {res.returncode}:\n{res.stderr}"
    return res.stdout
