"""No two modules of tasks/ import each other, directly or through others (issue 30,
item 3). Every import statement counts, those inside functions too. `import tasks.x` (or
`from tasks import x`) depends on tasks/x.py, not on the package's __init__."""
import ast
import os

from harness_fixtures import ROOT

TASKS = os.path.join(ROOT, "tasks")


def module_name(path: str) -> str:
    name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
    return name.removesuffix(".__init__")


def import_graph() -> dict[str, set[str]]:
    files = {module_name(os.path.join(d, f)): os.path.join(d, f)
             for d, _, names in os.walk(TASKS) for f in names if f.endswith(".py")}
    graph = {}
    for mod, path in files.items():
        deps = set()
        for node in ast.walk(ast.parse(open(path).read(), path)):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in files}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in files:
                for a in node.names:  # `from tasks import base`: the module tasks.base
                    sub = f"{node.module}.{a.name}"
                    deps.add(sub if sub in files else node.module)
        graph[mod] = deps - {mod}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each import circle once, as the path that closes it (depth-first search)."""
    found, state = [], {}

    def visit(mod, path):
        state[mod] = "open"
        for dep in sorted(graph[mod]):
            if state.get(dep) == "open":
                found.append(path[path.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, path + [dep])
        state[mod] = "done"
    for mod in sorted(graph):
        if mod not in state:
            visit(mod, [mod])
    return found


def test_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_issue30_no_import_circles_in_tasks():
    graph = import_graph()
    assert cycles(graph) == [], " ; ".join(" -> ".join(c) for c in cycles(graph))
    assert {"tasks.evaluate", "tasks.replicas", "tasks.tables", "tasks.tables_plots",
            "tasks.base", "tasks.livecodebench.task"} <= set(graph)
    assert "tasks.replicas" in graph["tasks.evaluate"]  # the graph sees real imports
