"""Reading multi-document YAML manifests into models, with one problem line per error.

Nothing here raises on bad input: every problem becomes a :class:`Problem` naming the
file, the object, the field path and the reason, so that ``dataflow-operator check``
can report all of them at once and never shows a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from dataflow_operator.api.dataflow import Dataflow
from dataflow_operator.api.meta import API_VERSION
from dataflow_operator.api.replica import Replica

__all__ = [
    "Manifest",
    "Problem",
    "defined_again",
    "duplicate_problems",
    "error_lines",
    "load_documents",
    "load_paths",
    "parse_object",
]

KINDS: dict[str, type[Dataflow] | type[Replica]] = {"Dataflow": Dataflow, "Replica": Replica}


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with one object: ``FILE: Kind/name: field.path: reason``.

    A reason of several lines (a message and its DETAIL or HINT) prints its further lines
    indented below the first.
    """

    file: str
    obj: str
    field: str
    reason: str

    def __str__(self) -> str:
        first, *rest = self.reason.splitlines() or [""]
        return "\n".join(
            [f"{self.file}: {self.obj}: {self.field}: {first}", *(f"    {r}" for r in rest)]
        )


@dataclass(frozen=True, slots=True)
class Manifest:
    """A parsed object and where it came from."""

    file: str
    resource: Dataflow | Replica
    index: int = 1
    """The document's position in its file, from 1."""

    @property
    def place(self) -> str:
        """``FILE (document N)``: where the object is defined."""
        return f"{self.file} (document {self.index})"

    @property
    def label(self) -> str:
        """``Kind/name`` as used in problem lines."""
        return f"{self.resource.kind}/{self.resource.metadata.name}"


def _location(loc: Sequence[int | str]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.startswith("function-"):
            continue
        else:
            path += f".{part}" if path else part
    return path or "(object)"


def error_lines(error: ValidationError, prefix: Sequence[int | str] = ()) -> list[tuple[str, str]]:
    """``(field.path, reason)`` for each error of a pydantic validation."""
    lines = []
    for item in error.errors(include_url=False):
        loc = [*prefix, *item["loc"]]
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown field"
        elif item["type"] == "missing":
            message = "required field is missing"
        elif item["type"] == "literal_error" or item["type"] == "enum":
            message = f"{message}, got {item.get('input')!r}"
        lines.append((_location(loc), message))
    return lines


def _label(document: dict[str, Any], index: int) -> str:
    kind = document.get("kind")
    metadata = document.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if isinstance(kind, str) and isinstance(name, str):
        return f"{kind}/{name}"
    if isinstance(kind, str):
        return f"{kind}/(document {index})"
    return f"(document {index})"


def parse_object(document: Any, file: str, index: int) -> Manifest | list[Problem]:
    """Parse one YAML document into a model, or the problems that prevent it."""
    if not isinstance(document, dict):
        kind_of = type(document).__name__
        return [
            Problem(
                file, f"(document {index})", "(document)", f"expected a mapping, got a {kind_of}"
            )
        ]
    label = _label(document, index)
    kind = document.get("kind")
    if kind not in KINDS:
        expected = " or ".join(KINDS)
        reason = (
            f"unknown kind {kind!r}; expected {expected}" if kind else "required field is missing"
        )
        return [Problem(file, label, "kind", reason)]
    if document.get("apiVersion") != API_VERSION:
        got = document.get("apiVersion")
        reason = f"expected {API_VERSION}, got {got!r}" if got else "required field is missing"
        return [Problem(file, label, "apiVersion", reason)]
    try:
        return Manifest(file, KINDS[kind].model_validate(document), index)
    except ValidationError as error:
        return [Problem(file, label, path, reason) for path, reason in error_lines(error)]


def load_documents(text: str, file: str) -> tuple[list[Manifest], list[Problem]]:
    """Parse a multi-document YAML text."""
    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        return [], [Problem(file, "(file)", "(document)", f"not valid YAML{where}: {problem}")]
    if not documents:
        return [], [Problem(file, "(file)", "(document)", "no manifests in the file")]
    manifests: list[Manifest] = []
    problems: list[Problem] = []
    for index, document in enumerate(documents, start=1):
        parsed = parse_object(document, file, index)
        if isinstance(parsed, Manifest):
            manifests.append(parsed)
        else:
            problems.extend(parsed)
    return manifests, problems


def _files(paths: Iterable[Path]) -> Iterable[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.suffix in {".yaml", ".yml"})
        else:
            yield path


def load_paths(paths: Iterable[Path]) -> tuple[list[Manifest], list[Problem]]:
    """Read manifests from files and directories (``*.yaml``/``*.yml`` below them)."""
    manifests: list[Manifest] = []
    problems: list[Problem] = []
    for path in _files(paths):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
            problems.append(Problem(str(path), "(file)", "(document)", f"cannot read: {reason}"))
            continue
        found, wrong = load_documents(text, str(path))
        manifests.extend(found)
        problems.extend(wrong)
    return manifests, problems


def defined_again(manifests: Sequence[Manifest]) -> dict[int, Problem]:
    """By position in ``manifests``: each object defined again (same kind, namespace and
    name), as a problem naming both places."""
    first: dict[tuple[str, str, str], Manifest] = {}
    again = {}
    for position, manifest in enumerate(manifests):
        resource = manifest.resource
        key = (resource.kind, resource.metadata.namespace or "default", resource.metadata.name)
        if key in first:
            again[position] = Problem(
                manifest.file,
                manifest.label,
                "metadata.name",
                f"defined twice: in {manifest.place} and in {first[key].place}; "
                "rename one or remove one",
            )
        else:
            first[key] = manifest
    return again


def duplicate_problems(manifests: Sequence[Manifest]) -> list[Problem]:
    """One problem for each object defined again (same kind, namespace and name), naming
    both places (file and document)."""
    return list(defined_again(manifests).values())
