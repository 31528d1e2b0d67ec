"""pytest plugin: compile every Triton launch for an H100/H200 (sm_90) on a machine without a
GPU, and launch nothing. `tests/test_triton_compile.py` runs the kernel test folders under it.

The Triton interpreter accepts code the compiler rejects (e.g. a jit function reading a
non-constexpr global), so interpreter tests alone let kernels reach the GPU uncompiled. Here
`JITFunction.run` compiles (warmup) with a driver that reports an sm_90 target; the tests'
own assertions then fail (no kernel ran) and are ignored: only compile errors count. Writes
{"compiled": [kernel names], "fp8": [kernels compiled for an FP8 cache (QUANT=True)],
"errors": [{"test", "error"}]} to $ZIPAGE_COMPILE_REPORT. With $ZIPAGE_PTX_DIR set, also
writes each compiled kernel's PTX code (no debug sections, line records or labels) there as
<kernel>_<sha1>.ptx: two trees whose folders list the same files compile to the same code
(docs/design.md, "A refactor that changes no code").
"""
import hashlib
import json
import os
import re

import torch
from triton.backends.compiler import GPUTarget
from triton.runtime import driver
from triton.runtime.jit import JITFunction

TARGET = GPUTarget("cuda", 90, 32)
COMPILED: set[str] = set()
FP8: set[str] = set()
ERRORS: list[dict] = []


class CompileOnlyDriver:
    """Just enough of a Triton driver to compile for TARGET; it never loads or launches."""

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return TARGET

    def get_active_torch_device(self):
        return torch.device("cpu")

    def is_active(self):
        return True


_run = JITFunction.run


def _compile_only_run(self, *args, grid, warmup, **kwargs):
    kernel = _run(self, *args, grid=grid, warmup=True, **kwargs)
    COMPILED.add(self.__name__)
    if os.environ.get("ZIPAGE_PTX_DIR"):
        _write_ptx_code(self.__name__, kernel.asm["ptx"], os.environ["ZIPAGE_PTX_DIR"])
    if kwargs.get("QUANT"):
        FP8.add(self.__name__)
    return kernel


def _write_ptx_code(name: str, ptx: str, folder: str) -> None:
    code = re.split(r"^\s*\.section", ptx, flags=re.M)[0]  # debug sections name source paths
    code = "\n".join(line for line in code.splitlines()
                     if not re.match(r"\s*(\.loc|\.file|//|\$L__)", line))
    os.makedirs(folder, exist_ok=True)
    digest = hashlib.sha1(code.encode()).hexdigest()[:12]
    with open(os.path.join(folder, f"{name}_{digest}.ptx"), "w") as f:
        f.write(code)


def pytest_configure(config):
    if os.environ.get("TRITON_INTERPRET", "0") == "1":
        raise RuntimeError("sm90_compile needs TRITON_INTERPRET unset (compiled jit functions)")
    driver.set_active(CompileOnlyDriver())
    JITFunction.run = _compile_only_run
    import zipage.kernels._dispatch as dispatch
    dispatch.INTERPRET = True  # the wrappers take the Triton path for CPU tensors


def pytest_runtest_makereport(item, call):
    if call.excinfo is not None and "CompilationError" in call.excinfo.typename:
        ERRORS.append({"test": item.nodeid, "error": str(call.excinfo.value)[-2000:]})


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("ZIPAGE_COMPILE_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump({"compiled": sorted(COMPILED), "fp8": sorted(FP8), "errors": ERRORS}, f,
                      indent=1)
