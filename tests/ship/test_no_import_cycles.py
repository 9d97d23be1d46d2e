"""No import cycle anywhere, type-only imports included (issue #22 item 8).

import-linter's contracts catch cycles between sibling packages and across the product's layers;
this checks what they leave open: any cycle between two modules, also across top-level packages
(``apps`` and ``controlplane``), in the same graph import-linter builds (``grimp``, its engine), with
imports under ``if TYPE_CHECKING:`` and inside functions counted.
"""

from __future__ import annotations

import grimp

PACKAGES = ("apps", "controlplane", "mindcluster", "simcluster")


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_is_in_an_import_cycle() -> None:
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False, cache_dir=None)
    assert len(graph.modules) > 300, "the graph holds the whole tree"
    assert _cycles(graph) == []


def test_the_cycle_finder_sees_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for module in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(module)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    graph.add_import(importer="a.y", imported="a.z")
    assert _cycles(graph) == [["a.x", "a.y"]]
