"""ZIPAGE_FP8_DECODE_LAUNCH: a sweep candidate timed in the engine without an edit. A typo
fails loudly, and a benchmark run records the override next to its results."""
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from zipage.kernels.fp8_launch import (FP8_DECODE, FP8_DECODE_FLAT, Launch, launch_from_text,
                                       launch_text)

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = Launch(torch.float16, tile_n=128, num_warps=4, num_stages=3, v_in_registers=False)


def test_override_changes_only_the_named_fields():
    got = launch_from_text(DEFAULT, "num_stages=2, maxnreg=128")
    assert (got.tile_n, got.num_warps, got.num_stages, got.maxnreg) == (128, 4, 2, 128)
    assert got.operand == torch.float16 and got.v_in_registers is False
    assert launch_from_text(DEFAULT, "") == DEFAULT


@pytest.mark.parametrize("launch", (FP8_DECODE,) + FP8_DECODE_FLAT)
def test_a_launch_written_as_text_reads_back_the_same(launch):
    """`bench fp8-energy-choice` writes a chosen row this way for the engine to read."""
    assert launch_from_text(FP8_DECODE, launch_text(asdict(launch))) == launch


@pytest.mark.parametrize("text", ["num_stage=2", "maxnreg=lots", "tile_n", "operand=3"])
def test_override_typo_is_an_error_naming_the_fields(text):
    with pytest.raises(ValueError, match="ZIPAGE_FP8_DECODE_LAUNCH: .* one of tile_n, "
                                         "num_warps, num_stages, maxnreg"):
        launch_from_text(DEFAULT, text)


def run_python(code: str, **env):
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(ROOT), **env))


def test_engine_default_and_benchmark_record_follow_the_variable():
    code = ("from zipage.kernels.fp8_launch import FP8_DECODE as L; import torch; "
            "from scripts.common import environment; "
            "print(L.num_stages, L.maxnreg, L.programs_per_sm, environment(torch.device('cpu'))"
            ".get('zipage_overrides'))")
    plain = run_python(code)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.split() == ["2", "None", "4", "None"]
    # the split kernel it replaced, for an A/B in the engine
    over = run_python(code, ZIPAGE_FP8_DECODE_LAUNCH="num_stages=3,programs_per_sm=0")
    assert over.returncode == 0, over.stderr
    assert over.stdout.startswith(
        "3 None 0 {'ZIPAGE_FP8_DECODE_LAUNCH': 'num_stages=3,programs_per_sm=0'}")
    bad = run_python(code, ZIPAGE_FP8_DECODE_LAUNCH="stages=2")
    assert bad.returncode != 0 and "'stages=2' is not NAME=INTEGER" in bad.stderr
