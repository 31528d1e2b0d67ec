"""Every Triton kernel compiles for sm_90 (H100/H200), checked on the CPU.

The interpreter tests (tests/kernels, tests/compression) check what the kernels compute; the
Triton interpreter does not check what the compiler accepts. This runs the same tests in a
subprocess under tests/sm90_compile.py, which compiles each launch for sm_90 to PTX and cubin
(Triton ships ptxas) and launches nothing. It caught the FP8 KV write reading a plain Python
global inside @triton.jit: fine in the interpreter, a CompilationError on the H200.
"""
import inspect
import json
import os
import subprocess
import sys

import pytest

triton = pytest.importorskip("triton")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def launched_kernels() -> set[str]:
    """Names of the @triton.jit kernels the wrappers launch (helpers are inlined into them)."""
    import importlib
    import pkgutil

    import zipage.kernels as pkg
    from triton.runtime.jit import JITFunction
    names = set()
    for info in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"zipage.kernels.{info.name}")
        for name, obj in inspect.getmembers(mod):
            if isinstance(obj, JITFunction) and name.endswith("_kernel") and obj.__module__ == mod.__name__:
                names.add(name)
    return names


@pytest.mark.slow
def test_every_kernel_compiles_for_sm90(tmp_path):
    if os.environ.get("TRITON_INTERPRET", "0") == "1":
        pytest.skip("run in the non-interpreter pytest process (scripts/run_tests.sh)")
    report = tmp_path / "compile.json"
    env = dict(os.environ, TRITON_INTERPRET="0", ZIPAGE_COMPILE_REPORT=str(report),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("ZIPAGE_REQUIRE_TRITON", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.sm90_compile",
                           "-p", "no:cacheprovider", "tests/kernels", "tests/compression"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(report.read_text())
    assert not data["errors"], "\n\n".join(f"{e['test']}:\n{e['error']}" for e in data["errors"])
    missing = launched_kernels() - set(data["compiled"])
    assert not missing, f"kernels no test launched (so never compiled): {sorted(missing)}"
    # the FP8 paths are other code (fp8_tiles.py): each kernel reading the cache compiles them
    fp8 = {"_split_kernel", "_prefill_kernel", "_attention_score_kernel"}
    assert fp8 <= set(data["fp8"]), f"never compiled for an fp8 cache: {fp8 - set(data['fp8'])}"
