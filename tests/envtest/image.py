"""The project's image, modelled on this machine from the Dockerfile's final stage.

A container runs as a node would run it: ``command`` replaces the image's ENTRYPOINT and
``args`` its CMD (no ``command``: ENTRYPOINT + ``args``). The ENTRYPOINT, CMD, ENV and
WORKDIR are read from the Dockerfile, so what the image would do with an argument is
what happens here. What the image installs is this tree's package in the venv: the
venv's ``bin`` leads ``PATH`` (the console script ``dataflow-operator``, ``python``) and
``PYTHONPATH`` is this tree's ``operator/``. ``tini``, an init that only forwards signals
and reaps, is not installed here: its part of the ENTRYPOINT (through ``--``) is dropped.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Image", "container_argv"]

ROOT = Path(__file__).resolve().parents[2]
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The base image's (python:*-slim) PATH."""
INITS = ("/usr/bin/tini", "tini")


def _words(value: str) -> list[str]:
    """An exec-form (JSON) or shell-form instruction's words."""
    value = value.strip()
    if value.startswith("["):
        words: list[str] = json.loads(value)
        return words
    return ["/bin/sh", "-c", value]


def _env_pairs(value: str) -> dict[str, str]:
    """``ENV A=1 B="x y"`` (or the legacy ``ENV A 1``)."""
    if "=" not in value.split(maxsplit=1)[0]:
        name, _, rest = value.partition(" ")
        return {name: rest.strip()}
    return dict(word.split("=", 1) for word in shlex.split(value))


@dataclass(frozen=True)
class Image:
    """ENTRYPOINT, CMD, ENV and WORKDIR of an image, and how to run it locally."""

    entrypoint: list[str]
    cmd: list[str]
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    venv_bin: Path = ROOT / ".venv" / "bin"
    source: Path = ROOT / "operator"

    @classmethod
    def from_dockerfile(cls, dockerfile: Path = ROOT / "Dockerfile") -> Image:
        """The final stage's instructions (continuation lines joined, comments skipped)."""
        text = re.sub(r"\\\n", " ", dockerfile.read_text())
        lines = [line.strip() for line in text.splitlines()]
        stages = [i for i, line in enumerate(lines) if line.upper().startswith("FROM ")]
        entrypoint: list[str] = []
        cmd: list[str] = []
        env: dict[str, str] = {}
        workdir = "/"
        for line in lines[stages[-1] :]:
            if not line or line.startswith("#"):
                continue
            instruction, _, value = line.partition(" ")
            match instruction.upper():
                case "ENTRYPOINT":
                    entrypoint, cmd = _words(value), []  # a new ENTRYPOINT resets CMD
                case "CMD":
                    cmd = _words(value)
                case "ENV":
                    env.update(_env_pairs(value))
                case "WORKDIR":
                    workdir = value.strip()
        return cls(entrypoint=entrypoint, cmd=cmd, env=env, workdir=workdir)

    def environment(self) -> dict[str, str]:
        """The image's environment here: its ENV, the venv first on PATH, this tree."""
        return {
            "PATH": f"{self.venv_bin}:{IMAGE_PATH}",
            "HOME": self.workdir,
            "PYTHONPATH": str(self.source),
            **self.env,
        }

    def local(self, argv: list[str]) -> list[str]:
        """``argv`` without the init the image would start it under."""
        if argv and argv[0] in INITS:
            rest = argv[1:]
            return rest[1:] if rest[:1] == ["--"] else rest
        return argv


def container_argv(image: Image, container: dict[str, Any]) -> list[str]:
    """What the container runs: Kubernetes' rules for ``command``/``args`` over the image."""
    command = container.get("command")
    args = container.get("args")
    if command:
        return [*command, *(args or [])]
    return [*image.entrypoint, *(args if args is not None else image.cmd)]
