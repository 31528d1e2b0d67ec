"""The wave evidence tools: traced steps grouped by batch size against two cost models, and
the preregistered probe (predictions written before it runs, checked after)."""
import json
import re

import pytest

from zipage.sim import wave_evidence as we
from zipage.sim.cost_model import CostModel, LinearModel, fixed_cost_model
from zipage.sim.decode_waves import DecodeWaves
from zipage.sim.features import StepFeatures
from zipage.sim.trace import FEATURES

# The current calibration (with waves) serves as both: the no-waves fit of the same grid is in
# the git history (a15cc64), and what is tested here is writing then checking predictions.
WAVES = NO_WAVES = "results/bench/step_cost_h200_qwen3-8b.json"


def cost(waves):
    device = LinearModel({"rows@1": 5e-3, "rows@512": 14e-3, "kv_read_per_mtoken": 0.034},
                         (1, 512), waves)
    return CostModel(device, fixed_cost_model().host, {})


def test_traced_steps_by_batch_size():
    waves = DecodeWaves(132, 8, 5, 268)
    old, new = cost(None), cost(waves)
    records = []
    for rows in (40, 48):
        for ctx in (10_000, 12_000):
            f = StepFeatures(decode_rows=rows, kv_read_tokens=rows * ctx)
            records.append({**{n: getattr(f, n) for n in FEATURES}, "device_s": new.device_s(f)})
    table = {t["rows"]: t for t in we.rows_table(records, old, new, min_kv=100_000)}
    assert table[48]["programs"] == 768 and table[48]["new_ratio"] == pytest.approx(1.0)
    assert table[48]["old_ratio"] < 0.9 and table[40]["old_ratio"] == pytest.approx(1.0)
    assert table[48]["ns_per_token"] == pytest.approx(34 * 928 / 768)
    assert "| 48 | 768 | 2 |" in we.markdown(list(table.values()))


def test_probe_predictions_are_written_then_checked(tmp_path, capsys):
    out = tmp_path / "pred.json"
    assert we.main(["--cost", NO_WAVES, "--waves", WAVES, "--write-probe", str(out)]) == 0
    preds = json.loads(out.read_text())
    assert [p["point"] for p in preds["predictions"]] == list(we.PROBE_POINTS)
    assert "--rows 40 44 48 56 80 88 96 112" in preds["probe"]
    by_name = {p["point"]: p for p in preds["predictions"]}
    # the points the hypotheses disagree on: 704 programs waste a third of a wave
    assert by_name["decode 44x16384"]["waste"] == pytest.approx((660 + 268) / 704)
    assert by_name["decode 40x16384"]["waste"] == 1.0
    # a probe that measured what the wave model said
    grid = [{"name": p["point"], "device_s": [p["waves_ms"] / 1e3] * 3}
            for p in preds["predictions"]]
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps({"raw": {"fullkv/b256": {"grid": grid}}}))
    assert we.main(["--cost", NO_WAVES, "--waves", WAVES, "--check-probe", str(out),
                    str(probe)]) == 0
    text = capsys.readouterr().out
    assert "rms error: no waves" in text and "waves 0.0%" in text


def test_programs_per_sm_from_a_kernels_resources():
    from zipage.sim.decode_occupancy import programs_per_sm
    # the bf16 split kernel compiled for sm_90 (Triton 3.9): shared memory binds, 5 per SM
    assert programs_per_sm(38912, 80) == {"by_shared_memory": 5, "by_registers": 6,
                                          "programs_per_sm": 5}
    # the fp8 one (128 keys, 3 stages, V transposed; Triton 3.6): 3 per SM by either bound
    assert programs_per_sm(75776, 168) == {"by_shared_memory": 3, "by_registers": 3,
                                           "programs_per_sm": 3}


def test_occupancy_tool_compiles_the_engines_decode_launches(capsys):
    """`python -m zipage.sim.decode_occupancy` (docs/throughput_model.md) compiles the split
    kernel as the engine launches it; it broke once when the kernel grew constexprs."""
    from zipage.sim.decode_occupancy import main
    assert main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("bf16 cache (64 keys per tile, 4 warps, 2 stages)")
    assert lines[1].startswith("fp8 cache (128 keys per tile, 4 warps, 3 stages)")
    assert lines[2].startswith("fp8 cache, e4m3 MMAs (128 keys per tile, 4 warps, 2 stages)")
    counts = []
    for line in lines:
        found = re.search(r"by registers: (\d+); K/V loop (\d+) instructions per tile .* "
                          r"(\d+) conversions, (\d+) MMAs", line)
        programs, instructions, conversions, mmas = map(int, found.groups())
        assert 1 <= programs <= 32 and instructions > 100 and mmas > 0
        counts.append(conversions)
    assert counts[2] * 4 < counts[1]  # e4m3 MMAs take the cache bytes unconverted
    capped = [line for line in lines if "maxnreg" in line]
    assert len(capped) == 3  # fp8_launch.FP8_DECODE_OCCUPANCY: the cap holds
    for line in capped:
        cap, regs = re.search(r"maxnreg (\d+), .*, (\d+) registers per thread", line).groups()
        assert int(regs) <= int(cap)


def test_flat_occupancy_tool_compiles_the_default_flat_launch():
    """`python -m zipage.sim.flat_occupancy` (docs/fp8.md, "The flat decode kernel"): the
    default FP8 decode compiles for sm_90 with 4 programs per SM under its register cap of
    128 (a few spilled bytes: 80 at one split with Triton 3.6, measured faster than 3 per SM
    unspilled), and the per-item branches leave a shorter common path than the loop."""
    from zipage.kernels.fp8_decode_flat import flat_maxnreg
    from zipage.kernels.fp8_launch import FP8_DECODE
    from zipage.sim.decode_occupancy import programs_per_sm, registers_and_stack
    from zipage.sim.flat_occupancy import compile_flat_kernel, loop_paths
    kernel = compile_flat_kernel(FP8_DECODE)
    regs, stack = registers_and_stack(kernel)
    assert regs <= flat_maxnreg(FP8_DECODE) == 128 and stack <= 128
    occupancy = programs_per_sm(kernel.metadata.shared, regs, FP8_DECODE.num_warps)
    assert occupancy["programs_per_sm"] >= FP8_DECODE.programs_per_sm == 4
    total, common = loop_paths(kernel)
    assert 500 < common < total - 100  # item change and output write: off the common path
