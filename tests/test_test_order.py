"""The order ``tests/conftest.py`` gives the collected tests (what the lanes rely on)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.conftest import pytest_collection_modifyitems


@dataclass
class _Item:
    """What the hook reads of a test item: its name, markers and fixtures."""

    name: str
    markers: set[str] = field(default_factory=set)
    fixturenames: tuple[str, ...] = ()
    callspec: object | None = None

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None

    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.markers.add(marker.name)


def test_slow_tests_come_first_and_the_executor_boundary_last() -> None:
    items = [
        _Item("quick"),
        _Item("boundary", {"local_cluster", "slow"}),
        _Item("slow", {"slow"}),
        _Item("quick_on_spark", fixturenames=("spark",)),
        _Item("slow_on_spark", {"slow"}, fixturenames=("spark",)),
        _Item("boundary_quick", {"local_cluster"}),
    ]
    pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert [item.name for item in items] == [
        "slow",
        "slow_on_spark",
        "quick",
        "quick_on_spark",
        "boundary",
        "boundary_quick",
    ]
    assert [item.name for item in items if "spark_session" in item.markers] == [
        "slow_on_spark",
        "quick_on_spark",
    ]


@dataclass
class _CallSpec:
    params: dict[str, object]


def test_an_argument_named_spark_is_not_the_spark_session() -> None:
    items = [
        _Item("memory_to_spark", fixturenames=("spark",), callspec=_CallSpec({"spark": "1g"})),
        _Item("on_spark", fixturenames=("spark",), callspec=_CallSpec({"seed": 1})),
    ]
    pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert [item.name for item in items if "spark_session" in item.markers] == ["on_spark"]
