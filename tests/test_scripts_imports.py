"""scripts/ has no import cycles (two modules importing each other, directly or through
others, at module level or inside a function): each concern builds on `common` and on
modules below it, never back."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The scripts.* modules this file imports anywhere in it (packages count as __init__)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from scripts.fidelity import methods` imports the module scripts.fidelity.methods
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        else:
            continue
        found |= {n for n in names if n in modules}
    return found


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in (ROOT / "scripts").rglob("*.py")}
    mods = set(files)
    return {m: imports_of(p, mods) - {m} for m, p in files.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if state.get(n) == "open":
                return stack[stack.index(n):] + [n]
            if n not in state and (cycle := visit(n)):
                return cycle
        state[m] = "done"
        stack.pop()
        return None

    for m in sorted(edges):
        if m not in state and (cycle := visit(m)):
            return cycle
    return None


def test_the_scripts_package_has_no_import_cycle():
    edges = graph()
    assert "scripts.sim.simulate" in edges and "scripts.common" in edges
    assert "scripts.sim.jobs" in edges["scripts.sim.paper"]  # the edge that replaced a cycle
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_a_cycle_is_found():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
