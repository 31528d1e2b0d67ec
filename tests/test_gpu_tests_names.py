"""The GPU tests (tests/gpu, tests/distributed) never run in CI, which has no GPU: a name they
read from a zipage module that was moved or renamed fails only on the GPU machine (it did:
the split kernel moved to paged_decode_split, and a GPU test still read paged_decode's).
This reads their source and checks every `module.name` and `from module import name` they
use against the modules as they are."""
import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GPU_TEST_FILES = sorted([*ROOT.glob("tests/gpu/*.py"), *ROOT.glob("tests/distributed/*.py")])


def zipage_names(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, module, name) for every name the file takes from a zipage module: the names of
    `from zipage... import ...`, and the attributes read off a zipage module bound by an
    import (`from zipage.kernels import paged_decode` then `paged_decode.x`)."""
    used, modules = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("zipage"):
            for alias in node.names:
                used.append((node.lineno, node.module, alias.name))
                full = f"{node.module}.{alias.name}"
                if is_module(full):
                    modules[alias.asname or alias.name] = full
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("zipage") and alias.asname:
                    modules[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in modules):
            used.append((node.lineno, modules[node.value.id], node.attr))
    return used


def is_module(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.parametrize("path", GPU_TEST_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_zipage_name_a_gpu_test_reads_exists(path):
    missing = [f"{path.name}:{line}: {module}.{name}"
               for line, module, name in zipage_names(ast.parse(path.read_text()))
               if not hasattr(importlib.import_module(module), name)
               and not is_module(f"{module}.{name}")]
    assert not missing, "GPU tests read names their modules no longer have:\n" + "\n".join(
        missing)
