"""LiveCodeBench execution semantics, re-implemented from its description; runs confined.

* stdin programs: a trailing `if __name__ == "__main__":` is unwrapped, imports stay at
  module level and every other statement moves into `wrapped_function()`, called once per
  test with that test's input as stdin (sys.stdin, input(), open(0), fd 0) and stdout
  captured (capped). SystemExit ends a test normally.
* functional (LeetCode) programs: the module is executed once, `Solution()` is built when
  the source says `class Solution`, and `fn_name` is called per test with one JSON value per
  input line. A top-level tuple result becomes a list; the value is sent back tagged so the
  evaluator can compare it with `==` exactly as Python would.
Both get the import prelude, recursion limit 50000 and int-str digit limit 50000. A per-test
timer raises `Timeout` (a BaseException, so `except Exception` in the program won't eat it).
"""
import ast
import io
import json
import numbers
import os
import signal
import sys
import time
import types

_MODULES = ("string re datetime collections heapq bisect copy math random statistics "
            "itertools functools operator io sys json typing").split()
PRELUDE = ("\n".join(f"from {m} import *" for m in _MODULES) + "\n"
           + "\n".join(f"import {m}" for m in _MODULES) + "\nsys.setrecursionlimit(50000)\n")


class Timeout(BaseException):
    pass


class OutputLimit(BaseException):
    pass


class _Capped(io.RawIOBase):
    """Byte sink that refuses to grow past `cap` (print bombs end here, not in RAM)."""

    def __init__(self, cap, keep=True):
        self.cap, self.keep, self.size, self.over, self.chunks = cap, keep, 0, False, []

    def writable(self):
        return True

    def write(self, b):
        if self.keep and (self.over or self.size + len(b) > self.cap):
            self.over = True
            raise OutputLimit(f"output over {self.cap} bytes")
        self.size += len(b)
        if self.keep:
            self.chunks.append(bytes(b))
        return len(b)


class _Proxy:
    """Installed once as sys.stdin / sys.stdout so that names bound while importing
    (`from sys import stdin`) still reach each test's fresh stream."""

    def __init__(self):
        object.__setattr__(self, "_f", None)

    def _use(self, f):
        object.__setattr__(self, "_f", f)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __setattr__(self, name, value):
        setattr(self._f, name, value)

    def __iter__(self):
        return iter(self._f)

    def __next__(self):
        return next(self._f)


def _is_main_guard(node):
    if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and len(node.test.ops) == 1 and isinstance(node.test.ops[0], ast.Eq)):
        return False
    sides = [node.test.left, node.test.comparators[0]]
    return (any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
            and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides))


def wrap_stdin_program(code):
    """Source text of the stdin program turned into imports + `wrapped_function()`."""
    body = []
    for node in ast.parse(code).body:
        body.extend(node.body if _is_main_guard(node) else [node])
    imports = [n for n in body if isinstance(n, (ast.Import, ast.ImportFrom))]
    rest = [n for n in body if not isinstance(n, (ast.Import, ast.ImportFrom))]
    fn = ast.FunctionDef(name="wrapped_function", args=ast.arguments(
        posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
        defaults=[]), body=rest or [ast.Pass()], decorator_list=[], returns=None)
    module = ast.fix_missing_locations(ast.Module(body=imports + [fn], type_ignores=[]))
    return PRELUDE + ast.unparse(module)


def encode(v):
    """JSON-safe tagged form of a result that keeps Python's `==` (tuple != list, set, dict
    keys of any type, big ints)."""
    if v is None or isinstance(v, (bool, str, float)):
        return v
    if isinstance(v, int):
        return v if -2**62 < v < 2**62 else {"$int": hex(v)}
    if isinstance(v, list):
        return [encode(x) for x in v]
    for tag, cls in (("$tuple", tuple), ("$set", set), ("$frozenset", frozenset)):
        if isinstance(v, cls):
            return {tag: [encode(x) for x in v]}
    if isinstance(v, dict):
        return {"$dict": [[encode(k), encode(x)] for k, x in v.items()]}
    if isinstance(v, numbers.Integral):  # numpy ints and friends compare like ints
        return encode(int(v))
    if isinstance(v, numbers.Real):
        return float(v)
    return {"$opaque": type(v).__name__}


def _guard():
    """Defence in depth only (the sandbox is the OS-level confinement): disable what
    LiveCodeBench's own guard disables, so verdicts of programs that call them match."""
    import builtins
    import shutil
    import subprocess
    for name in ("kill killpg system popen fork forkpty remove removedirs "
                 "rmdir unlink rename renames replace truncate chmod fchmod lchmod chown "
                 "fchown lchown chroot setuid execv execve").split():
        if hasattr(os, name):
            setattr(os, name, None)
    shutil.rmtree = shutil.move = shutil.chown = None
    subprocess.Popen = None
    builtins.quit = None
    for name in ("psutil", "resource", "joblib", "tkinter", "ipdb"):
        sys.modules[name] = None


def _timed(fn, timeout):
    """Run fn() under the per-test timer -> (status, value, error)."""
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        return "ok", fn(), None
    except SystemExit:
        return "ok", None, None
    except Timeout:
        return "timeout", None, f"time limit {timeout}s"
    except OutputLimit as e:
        return "output_limit", None, str(e)
    except BaseException as e:  # noqa: BLE001 - any error of the program is a runtime error
        return "runtime_error", None, f"{type(e).__name__}: {e}"[:500]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _set_stdin(data):
    fd = os.memfd_create("stdin")
    os.write(fd, data)  # memfd writes never block, whatever the size
    os.lseek(fd, 0, os.SEEK_SET)
    if fd != 0:  # fd 0 is free when the last test's open(0) closed it
        os.dup2(fd, 0)
        os.close(fd)


def run(job, send):
    def on_alarm(signum, frame):
        raise Timeout()
    signal.signal(signal.SIGALRM, on_alarm)
    if hasattr(sys, "set_int_max_str_digits"):  # Python >= 3.11 (and late 3.10s)
        sys.set_int_max_str_digits(50000)
    code, timeout, mode = job["code"], job["timeout"], job["mode"]
    stdin, stdout = _Proxy(), _Proxy()
    sys.stdin, sys.stdout = stdin, stdout
    stdout._use(io.TextIOWrapper(_Capped(0, keep=False), encoding="utf-8", write_through=True))
    if job.get("lcb_guard", True):
        _guard()
    module = types.ModuleType("solution_module")
    try:
        source = wrap_stdin_program(code) if mode == "stdin" else PRELUDE + code
        compiled = compile(source, "<solution>", "exec")
    except BaseException as e:  # noqa: BLE001 - SyntaxError, RecursionError, MemoryError...
        return send({"compile_error": f"{type(e).__name__}: {e}"[:500]})
    status, _, err = _timed(lambda: exec(compiled, module.__dict__), timeout)
    if status != "ok":
        return send({"compile_error": f"while loading the program: {err}"})
    if mode == "stdin":
        target = getattr(module, "wrapped_function")
    else:
        try:
            owner = module.Solution() if "class Solution" in code else module
            target = getattr(owner, job["fn_name"])
        except BaseException as e:  # noqa: BLE001
            return send({"compile_error": f"{type(e).__name__}: {e}"[:500]})
    for i, text in enumerate(job["inputs"]):
        start = time.perf_counter()
        if mode == "stdin":
            data = text.encode("utf-8")
            _set_stdin(data)
            stdin._use(io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
            sink = _Capped(job["max_output_bytes"])
            stdout._use(io.TextIOWrapper(sink, encoding="utf-8", write_through=True))
            status, _, err = _timed(target, timeout)
            try:
                stdout._f.flush()
            except BaseException:  # noqa: BLE001
                pass
            status = "output_limit" if sink.over else status
            out = b"".join(sink.chunks).decode("utf-8", "replace")
        else:
            try:
                args = [json.loads(line) for line in text.split("\n")]
            except ValueError as e:
                return send({"runner_error": f"test {i}: input is not JSON per line: {e}"})
            status, value, err = _timed(lambda: target(*args), timeout)
            value = list(value) if isinstance(value, tuple) else value
            try:
                out = encode(value) if status == "ok" else None
            except BaseException as e:  # noqa: BLE001 - e.g. a self-referencing list
                status, out, err = "runtime_error", None, f"unencodable result: {type(e).__name__}"
        send({"test": i, "status": status, "output": out, "error": err,
              "time": round(time.perf_counter() - start, 4)})
