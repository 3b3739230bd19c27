"""No module of the package depends on itself: its imports have no cycle anywhere.

The layers contracts in ``pyproject.toml`` order the rooms of each package; within a
room, and between a package and its own ``__init__``, only this test stands against a
cycle. It reads every import statement (those inside functions and those made only for
type checking included: a cycle there still ties two modules together) from the
source with grimp, the graph import-linter builds too.
"""

from __future__ import annotations

import grimp

PACKAGE = "dataflow_operator"


def import_cycles(graph: grimp.ImportGraph) -> list[str]:
    """One shortest cycle through each import that is part of a cycle, as ``a -> b -> a``."""
    cycles: set[str] = set()
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                cycles.add(" -> ".join((importer, *back)))
    return sorted(cycles)


def test_the_package_has_no_import_cycle() -> None:
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    assert len(graph.modules) > 100, "the package was not found"
    assert import_cycles(graph) == []


def test_a_cycle_is_found_and_named() -> None:
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.b", "pkg.c", "pkg.d"):
        graph.add_module(module)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    graph.add_import(importer="pkg.c", imported="pkg.a")
    graph.add_import(importer="pkg.d", imported="pkg.a")
    assert import_cycles(graph) == [
        "pkg.a -> pkg.b -> pkg.c -> pkg.a",
        "pkg.b -> pkg.c -> pkg.a -> pkg.b",
        "pkg.c -> pkg.a -> pkg.b -> pkg.c",
    ]
