"""`bench fp8-energy-choice`: the FP8 decode launch for an engine run, by the rule fixed before
the run (fewest mJ per call among the sweep's fixed rows, if 2% under the default)."""
import json
import subprocess
import sys

import pytest

from scripts.throughput.fp8_energy_choice import choose, engine_setting
from scripts.throughput.fp8_kernel_summary import (E4M3_LABEL, FLAT_LABEL, OCCUPANCY_LABEL,
                                                   SPLIT_LABEL)

B = "decode (b) 64 rows x 16384 keys, H 32/8, D 128, block 256"
A = "decode (a) 512 rows x 2048 keys, H 32/8, D 128, block 256"


def row(label, mj, workload=B, **launch):
    base = dict(kind="fp8", workload=workload, label=label, operand="f16", tile_n=128,
                num_warps=4, num_stages=2, v_path="transposed", splits=1, programs_per_sm=4,
                ms=0.54, correct=True, mj_per_call=mj)
    return {**base, **launch}


def sweep(*extra):
    return [dict(kind="bf16", workload=B, ms=1.02, mj_per_call=900.0),
            row("default", 400.0),
            row(SPLIT_LABEL, 430.0, num_stages=3, programs_per_sm=0, splits=2),
            row(E4M3_LABEL, 405.0, operand="e4m3", programs_per_sm=0, splits=2),
            row(OCCUPANCY_LABEL, 399.0, maxnreg=128, programs_per_sm=0, splits=2),
            *extra]


def test_a_launch_two_percent_under_the_default_is_chosen_with_its_engine_setting():
    chosen, default, _ = choose(sweep(row(FLAT_LABEL, 388.0, num_warps=2)), "b", 0.02)
    assert (chosen["label"], chosen["num_warps"]) == (FLAT_LABEL, 2)
    assert engine_setting(chosen) == (
        "ZIPAGE_FP8_DECODE_LAUNCH=tile_n=128,num_warps=2,num_stages=2,programs_per_sm=4", "")


def test_the_default_stays_when_nothing_saves_two_percent():
    chosen, _, pool = choose(sweep(row(FLAT_LABEL, 393.0, num_warps=2)), "b", 0.02)
    assert chosen["label"] == "default" and engine_setting(chosen) == ("", "")
    assert pool[0]["mj_per_call"] == 393.0  # the best is listed, not taken


def test_a_split_kernel_row_keeps_programs_per_sm_zero_and_its_register_cap():
    chosen, _, _ = choose(sweep(row(OCCUPANCY_LABEL, 380.0, maxnreg=96, programs_per_sm=0)),
                          "b", 0.02)
    assert engine_setting(chosen)[0] == ("ZIPAGE_FP8_DECODE_LAUNCH=tile_n=128,num_warps=4,"
                                         "num_stages=2,maxnreg=96,programs_per_sm=0")


def test_the_e4m3_row_is_run_by_its_option_not_a_launch():
    chosen, _, _ = choose(sweep(row(E4M3_LABEL, 300.0, operand="e4m3")), "b", 0.02)
    assert engine_setting(chosen) == ("", "--fp8-decode e4m3")


@pytest.mark.parametrize("not_a_candidate", [
    row(FLAT_LABEL, 100.0, correct=False),                   # wrong output
    row(None, 100.0, num_warps=8),                           # the search stage's rows
    row("V in rows, read as bytes", 100.0, v_path="bytes"),  # not the engine's V layout
    row(FLAT_LABEL, 100.0, workload=A),                      # another shape
])
def test_rows_the_rule_excludes_are_never_chosen(not_a_candidate):
    chosen, _, _ = choose(sweep(not_a_candidate), "b", 0.02)
    assert chosen["label"] == "default"


def test_without_energy_readings_it_fails_and_writes_no_env_file(tmp_path):
    rows = [{k: v for k, v in r.items() if k != "mj_per_call"} for r in sweep()]
    (tmp_path / "sweep.json").write_text(json.dumps(dict(decode=rows)))
    done = subprocess.run([sys.executable, "-m", "scripts.bench", "fp8-energy-choice",
                           str(tmp_path / "sweep.json"), "--env-file", str(tmp_path / "e.env")],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "no default row" in done.stderr
    assert not (tmp_path / "e.env").exists()


def test_the_env_file_runs_the_fp8_arm_in_a_shell(tmp_path):
    (tmp_path / "sweep.json").write_text(json.dumps(dict(
        decode=sweep(row(FLAT_LABEL, 380.0, num_warps=2)))))
    env_file = tmp_path / "arm.env"
    done = subprocess.run([sys.executable, "-m", "scripts.bench", "fp8-energy-choice",
                           str(tmp_path / "sweep.json"), "--env-file", str(env_file)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "chosen (margin 2%): flat loop" in done.stdout
    shell = subprocess.run(["bash", "-c", f". {env_file}; env $FP8_ARM_ENV sh -c "
                            "'echo $ZIPAGE_FP8_DECODE_LAUNCH' $FP8_ARM_ARGS"],
                           capture_output=True, text=True)
    assert shell.stdout.strip() == "tile_n=128,num_warps=2,num_stages=2,programs_per_sm=4"


@pytest.mark.parametrize("content", [None, "{not json", "{}", '{"decode": 3}'])
def test_a_missing_or_malformed_sweep_file_is_one_clear_line(tmp_path, content):
    path = tmp_path / "sweep.json"
    if content is not None:
        path.write_text(content)
    done = subprocess.run([sys.executable, "-m", "scripts.bench", "fp8-energy-choice",
                           str(path)], capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("fp8-energy-choice: ") and str(path) in done.stderr


def test_a_shape_the_sweep_does_not_have_is_refused_by_name(tmp_path):
    (tmp_path / "sweep.json").write_text(json.dumps(dict(decode=sweep())))
    done = subprocess.run([sys.executable, "-m", "scripts.bench", "fp8-energy-choice",
                           str(tmp_path / "sweep.json"), "--shape", "c"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "invalid choice: 'c'" in done.stderr


@pytest.mark.parametrize("margin", ["-0.05", "1", "2%"])
def test_a_margin_outside_zero_to_one_is_refused_before_reading_the_sweep(tmp_path, margin):
    env_file = tmp_path / "arm.env"
    done = subprocess.run([sys.executable, "-m", "scripts.bench", "fp8-energy-choice",
                           str(tmp_path / "absent.json"), "--margin", margin,
                           "--env-file", str(env_file)], capture_output=True, text=True)
    assert done.returncode == 2 and "--margin" in done.stderr and "Traceback" not in done.stderr
    assert not env_file.exists()
