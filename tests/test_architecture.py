"""The layout holds: no import cycles, imports only go down the layers, no module grows past its size.

Read from the source with ``ast`` (nothing is imported), so a cycle hidden behind a function-level
import counts too; imports under ``if TYPE_CHECKING:`` do not (they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "lessonbank"
MAX_LINES = 620

# Layers from the top down; a module may import its own layer's modules and any layer below.
# The first matching prefix decides a module's layer.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # Claude Code's hooks, installer and plugin and the OpenAI Agents SDK adapter drive a bank; the
    # agent-file formats (skills, AGENTS.md) are written and read like the other exports, so they sit
    # with the services.
    (
        "interfaces",
        (
            "lessonbank.cli",
            "lessonbank.server",
            "lessonbank.integrations.claude",
            "lessonbank.integrations.openai_agents",
        ),
    ),
    ("facades", ("lessonbank.bank", "lessonbank.loop", "lessonbank.remote")),
    (
        "services",
        ("lessonbank.services", "lessonbank.jobs", "lessonbank.retrieval", "lessonbank.integrations"),
    ),
    ("adapters", ("lessonbank.stores", "lessonbank.llm", "lessonbank.reflectors", "lessonbank.embedders")),
    (
        "rules",
        (
            "lessonbank.ports",
            "lessonbank.lessons",
            "lessonbank.queueing",
            "lessonbank.policy",
            "lessonbank.scoping",
            "lessonbank.injection",
        ),
    ),
    ("base", ("lessonbank",)),
]


def module_names() -> dict[str, Path]:
    """Every module, the compiled ones too (by their type stubs: ``retrieval/_postings.pyi``)."""
    found = {}
    stubs = [path for path in (SRC / PACKAGE).rglob("*.pyi") if not path.with_suffix(".py").exists()]
    for path in sorted([*(SRC / PACKAGE).rglob("*.py"), *stubs]):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports (``from pkg import mod`` counts as importing ``pkg.mod``)."""
    tree = ast.parse(path.read_text("utf-8"))
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    found.add(f"{base}.{alias.name}")
                elif base in modules:
                    found.add(base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(name)
    return found


def graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return out


def layer(module: str) -> int:
    for rank, (_name, prefixes) in enumerate(LAYERS):
        if any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes):
            return rank
    raise AssertionError(f"{module} belongs to no layer")


def test_no_import_cycles() -> None:
    assert cycles(graph()) == []


def test_imports_only_go_down_the_layers() -> None:
    upward = []
    for module, targets in graph().items():
        for target in targets:
            if target == PACKAGE:
                if module != PACKAGE:
                    upward.append((module, target))  # the curated API is for users, not the package
            elif layer(target) < layer(module):
                upward.append((module, target))
    assert upward == []


@pytest.mark.parametrize("module", sorted(module_names()))
def test_no_module_grows_past_its_size(module: str) -> None:
    lines = len(module_names()[module].read_text("utf-8").splitlines())
    assert lines <= MAX_LINES, f"{module} has {lines} lines: split it by what changes together"


def test_the_checker_sees_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
