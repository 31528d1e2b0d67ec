"""Compression tests run the Triton kernels in the CPU interpreter.

TRITON_INTERPRET must be set before triton (and zipage.kernels) is imported, because
triton.jit picks the interpreter at decoration time.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tests.triton_interpreter import _seed, triton_cpu  # noqa: E402,F401 (fixtures)

