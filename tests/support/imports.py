"""Reading a Python file's imports with ``ast``: what the layout and independence tests check.

Statically, so an import inside a function or under ``if TYPE_CHECKING:`` counts too.
"""

from __future__ import annotations

import ast


def imported_modules(tree: ast.AST, package: str, *, names: bool = False) -> list[tuple[int, str]]:
    """(line, module) for every ``import``/``from … import`` in ``tree``, relative imports resolved
    against ``package``; with ``names``, ``from x import y`` also yields ``x.y`` (``y`` may be a module)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            found.append((node.lineno, base))
            if names:
                found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found
