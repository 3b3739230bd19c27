"""The driver JVM's stderr, without the lines no Spark or JVM option silences.

- ``WARNING: Using incubator modules: jdk.incubator.vector``: the JVM prints it at
  start because Spark's launcher always adds ``--add-modules=jdk.incubator.vector``.
- ``Starting Streaming TransformWithStateInPandas Python worker.`` and its siblings:
  ``pyspark.sql.streaming.transform_with_state_driver_worker`` ``print``s them on every
  query start, and the JVM copies its Python workers' stdout onto its own stderr.

Everything else (errors Spark logs, a JVM crash) is forwarded unchanged.
"""

from __future__ import annotations

import os
import re
from typing import IO

__all__ = ["forward_stderr", "is_noise"]

_NOISE = re.compile(
    r"^(WARNING: Using incubator modules: "
    r"|Starting Streaming \w+ Python worker\."
    r"|Streaming \w+ Python worker (Starting execution|Completed execution|finish init stage"
    r"|received parameters))"
)


def is_noise(line: str) -> bool:
    """True for a line of start-up chatter that must not reach the user."""
    return bool(_NOISE.match(line))


def forward_stderr(stream: IO[bytes], fd: int) -> None:
    """Copy ``stream`` to file descriptor ``fd`` line by line, dropping noise.

    The workers' messages end with an extra newline; the blank line after a dropped line
    is dropped with it. Returns when ``stream`` ends (the JVM exited).
    """
    dropped = False
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if is_noise(line) or (dropped and not line.strip()):
            dropped = is_noise(line)
            continue
        dropped = False
        os.write(fd, raw)
