"""The one C extension (the rest of the build is pyproject.toml's): issue 18's request
metrics recording, broker/metrics/_record.c. Here rather than in pyproject.toml, where
setuptools still calls `ext-modules` experimental."""

from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "odradek.broker.metrics._record", ["src/odradek/broker/metrics/_record.c"],
    extra_compile_args=["-O2", "-Wall", "-Wextra"])])
