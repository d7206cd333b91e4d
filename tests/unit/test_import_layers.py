"""The package's import seams: no cycle among its parts (ehrbench.<part>, a subpackage or a top-level module), and the
shared task types at the bottom. A cycle means two parts cannot be understood, tested or changed apart; the report
names each import that closes one."""

from __future__ import annotations

import grimp
import pytest


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("ehrbench")


def part(module: str) -> str:
    return ".".join(module.split(".")[:2])


def part_imports(graph: grimp.ImportGraph) -> dict[tuple[str, str], list[str]]:
    """(importing part, imported part) -> the module imports behind it, for every import across parts."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.startswith("ehrbench.") and part(module) != part(imported):
                edges.setdefault((part(module), part(imported)), []).append(f"{module} -> {imported}")
    return edges


def cycles(edges) -> list[list[str]]:
    """The strongly connected groups of more than one part (Tarjan)."""
    successors: dict[str, set[str]] = {}
    for importer, imported in edges:
        successors.setdefault(importer, set()).add(imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(successors.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(successors):
        if node not in index:
            visit(node)
    return found


def test_no_part_of_the_package_imports_its_way_back_to_itself(graph):
    edges = part_imports(graph)
    problems = [f"{group}: " + "; ".join(link for (a, b), links in edges.items() if a in group and b in group
                                         for link in links) for group in cycles(edges)]
    assert not problems, "import cycles between parts of ehrbench:\n" + "\n".join(problems)


def test_the_shared_task_types_import_nothing_of_ehrbench(graph):
    assert {m for m in graph.find_modules_directly_imported_by("ehrbench.tasks") if m.startswith("ehrbench")} == set()


def test_the_cycle_finder_finds_a_cycle_and_nothing_else():
    """The check itself can fail: agents -> evaluation -> agents (the cycle before ehrbench.tasks) is found."""
    edges = {("ehrbench.agents", "ehrbench.evaluation"): ["a"], ("ehrbench.evaluation", "ehrbench.agents"): ["b"],
             ("ehrbench.evaluation", "ehrbench.dq"): ["c"], ("ehrbench.dq", "ehrbench.settings"): ["d"]}
    assert cycles(edges) == [["ehrbench.agents", "ehrbench.evaluation"]]
