"""`bench fp8-kernels` (scripts/throughput/fp8_kernels.py) runs end to end (--cpu-smoke: tiny
shapes, Triton interpreter, one variant each) and reports what it measured: bytes per variant,
errors, the JSON."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULE = "scripts.throughput.fp8_kernels"


def test_fp8_kernel_sweep_cpu_smoke(tmp_path):
    out = tmp_path / "sweep.json"
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-m", MODULE, "--cpu-smoke", "--json", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "copy bandwidth" in proc.stdout and "speed-up" in proc.stdout
    data = json.loads(out.read_text())
    assert data["copy_gbps"] > 0 and data["environment"]["triton"]
    kinds = {r["kind"]: r for r in data["decode"]}
    assert set(kinds) == {"bf16", "fp8"}
    # 3 rows x 48 keys, H_kv 2, D 32: K + V (+ a float32 scale per row for fp8)
    assert kinds["bf16"]["bytes"] == 3 * 48 * 2 * 2 * 32 * 2
    assert kinds["fp8"]["bytes"] == 3 * 48 * 2 * 2 * (32 + 4)
    for row in data["decode"] + data["other"]:
        assert "error" not in row, row
        assert row["ms"] > 0 and row["rel_err"] < 2e-2, row  # bf16 outputs: ~1 ulp
    assert {r["workload"].split()[0] for r in data["other"]} == {"prefill", "score"}
    prefill = [r["kind"] for r in data["other"] if r["workload"].startswith("prefill")]
    assert prefill == ["bf16", "fp8, V transposed", "fp8, V registers", "fp8, V bytes"]
    score = [r["kind"] for r in data["other"] if r["workload"].startswith("score")]
    assert score == ["bf16", "fp8", "fp8 16 keys, 4 warps, 2 stages"]  # a launch candidate
    assert data["best"]["a"]["fp8"]["kind"] == "fp8"
    operands = [r.get("operand") for r in data["decode"] if r["kind"] == "fp8"]
    # the default (the flat kernel), the split kernel it replaced, the e4m3-MMA decode, a
    # launch with more programs per SM and another flat launch, side by side
    assert operands == ["f16", "f16", "e4m3", "f16", "f16"]
    default, split = data["decode"][1:3]
    assert default["label"] == "default" and default["programs_per_sm"] == 4
    assert split["programs_per_sm"] == 0 and data["best"]["a"]["split_over_default"][0] > 0
    assert "e4m3 MMAs" in proc.stdout and data["best"]["a"]["e4m3_over_default"] > 0
    capped, flat = data["decode"][-2:]
    assert capped["maxnreg"] == 128 and capped["num_stages"] == 2
    assert "maxnreg 128" in proc.stdout and data["best"]["a"]["occupancy_over_default"][0] > 0
    assert flat["programs_per_sm"] == 4 and flat["label"] == "flat loop"
    assert "programs_per_sm 4" in proc.stdout and data["best"]["a"]["flat_over_default"][0] > 0


def test_fixed_only_times_the_decode_candidates_without_prefill_or_score(tmp_path):
    out = tmp_path / "sweep.json"
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-m", MODULE, "--cpu-smoke", "--fixed-only",
                           "--json", str(out)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["other"] == [] and "prefill" not in proc.stdout
    assert [r["label"] for r in data["decode"] if r["kind"] == "fp8"][0] == "default"
    both = subprocess.run([sys.executable, "-m", MODULE, "--fixed-only", "--full-grid"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_bad_shapes_or_negative_energy_seconds_exit_2_before_anything_is_timed(tmp_path):
    """`--shapes ""` used to time nothing and exit 0; `--energy -1` looped no time at all."""
    out = tmp_path / "sweep.json"
    for bad, says in ((["--shapes", ""], "choose from ['a', 'b']"),
                      (["--shapes", "a,c"], "choose from ['a', 'b']"),
                      (["--energy", "-1"], "seconds, 0 or more"),
                      (["--energy", "nan"], "a finite number"),
                      (["--energy", "1s"], "not a number")):
        proc = subprocess.run([sys.executable, "-m", MODULE, *bad, "--json", str(out)],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and says in proc.stderr, (bad, proc.stderr)
        assert "copy bandwidth" not in proc.stdout and not out.exists()
    from scripts.throughput.fp8_kernels import shape_names
    assert shape_names(" b, a ") == ["b", "a"]


def test_sweep_summary_never_picks_a_variant_with_wrong_output(capsys):
    """The e4m3 decode's first GPU sweep (H100, 2026-12-05) was 1% faster than the default
    with outputs 100% off; the summary had named it the best variant."""
    from scripts.throughput.fp8_kernel_summary import E4M3_LABEL, summary
    work = "decode (a) 512 rows x 2048 keys"

    def row(kind, ms, err, label=None):
        return dict(workload=work, kind=kind, ms=ms, rel_err=err, correct=err <= 1e-2,
                    label=label, operand="f16", tile_n=128, num_warps=4, num_stages=3,
                    splits=1, v_path="transposed", gbps=1.0, pct_roofline=50.0)
    rows = [row("bf16", 1.4, 2e-3), row("fp8", 0.95, 2e-3, "default"),
            row("fp8", 0.93, 1.0, E4M3_LABEL), row("fp8", 0.90, float("nan"))]
    unchecked = row("fp8", 0.80, 0.0)  # timed, then its output check raised
    del unchecked["rel_err"], unchecked["correct"]
    rows.append(dict(unchecked, error="RuntimeError: out of memory"))
    best = summary(rows, {"a": None})
    assert best["a"]["fp8"]["label"] == "default" and "e4m3_over_default" not in best["a"]
    out = capsys.readouterr().out
    assert "3 variant(s) with wrong or unchecked output left out" in out
    assert "e4m3 MMAs: wrong output, no comparison" in out
