"""The docs hold together: links resolve, the README stays short, the layout table is true.

Every relative link in the README and the Markdown pages must name a file that exists
and, for a Markdown target, a heading in it (GitHub's anchors); the README is for users
and stays within :data:`README_MAX_LINES`; ``docs/architecture.md``'s layout table names
exactly the package's subpackages; ``docs/configuration.md`` lists every operator setting.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from dataflow_operator.controller.config import ENV_NAMES, add_config_arguments

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "operator" / "dataflow_operator"
README = ROOT / "README.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
README_MAX_LINES = 200
MAX_LINE_CHARS = 400

PAGES = sorted(
    [README, ROOT / "CHANGELOG.md", ROOT / "bench" / "RESULTS.md", *(ROOT / "docs").glob("*.md")]
)

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _prose(text: str) -> str:
    """The text without code blocks and code spans, where link syntax is not a link."""
    return _CODE.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a Markdown page has (a repeated heading gets ``-1``, ``-2``…)."""
    seen: dict[str, int] = {}
    found = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text())):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` whose file or anchor does not exist."""
    broken = []
    for target in _LINK.findall(_prose(page.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:…
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading with anchor #{anchor}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert page.exists(), f"{page.relative_to(ROOT)} is missing"
    assert not broken_links(page), f"{page.relative_to(ROOT)}: {broken_links(page)}"


def test_the_link_check_catches_a_missing_file_and_anchor(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Top\n\n## What `make run` shows\n")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#what-make-run-shows) [gone](missing.md) [bad](a.md#nope) "
        "[self](#here) `[code](nowhere.md)` [web](https://example.com)\n\n## Here\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "a.md#nope: no heading with anchor #nope",
    ]


def test_the_readme_is_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move detail to docs/"
    )
    long = [number for number, line in enumerate(lines, 1) if len(line) > MAX_LINE_CHARS]
    assert not long, f"README.md lines over {MAX_LINE_CHARS} characters: {long}"


def _layout_rows() -> list[str]:
    text = ARCHITECTURE.read_text()
    section = text.split("## The package's layout", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z_/]+)/` \|", section, re.MULTILINE)


def test_the_layout_table_names_exactly_the_subpackages() -> None:
    subpackages = sorted(
        str(init.parent.relative_to(PACKAGE))
        for init in PACKAGE.rglob("__init__.py")
        if init.parent != PACKAGE
    )
    rows = _layout_rows()
    assert len(rows) == len(set(rows)), f"docs/architecture.md repeats a row: {rows}"
    assert sorted(rows) == subpackages, (
        "docs/architecture.md's layout table must have one row per subpackage of "
        f"operator/dataflow_operator: missing {sorted(set(subpackages) - set(rows))}, "
        f"no such subpackage {sorted(set(rows) - set(subpackages))}"
    )


def test_the_operator_settings_page_lists_every_setting() -> None:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    flags = {
        action.dest.removeprefix("config_"): action.option_strings[0]
        for action in parser._actions
        if action.dest.startswith("config_")
    }
    page = (ROOT / "docs" / "configuration.md").read_text()
    rows = {
        match.group(1): match.group(2)
        for match in re.finditer(r"^\| `(DATAFLOW_\w+)` \| `(--[\w-]+)` \|", page, re.MULTILINE)
    }
    expected = {ENV_NAMES[name]: flags[name] for name in ENV_NAMES}
    assert rows == expected, "docs/configuration.md's table differs from controller/config.py"
