"""The whole flow on the CPU: a measured run with a trace (`bench long`), a calibration
(`bench calibrate`), its validation (`bench simulate --validate`: exact step, preemption and
compression counts), a refit to the trace, a plain prediction and the paper sweep with plot."""
import json
import os

import pytest

from scripts import bench
from zipage.sim.report import REPORT_FORMAT


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    d = tmp_path_factory.mktemp("flow")
    report, trace, cal = d / "long.json", d / "long_trace.json.gz", d / "cal.json"
    assert bench.main(["long", "--cpu-smoke", "--json", str(report), "--trace", str(trace)]) == 0
    assert bench.main(["calibrate", "--cpu-smoke", "--out", str(cal), "--warmup", "0",
                       "--sync-reps", "1", "--reps", "2", "--host-steps", "20"]) == 0
    return d, report, trace, cal


def test_long_writes_the_report_format(measured):
    _, report, _, _ = measured
    r = json.loads(report.read_text())
    assert r["format"] == REPORT_FORMAT and r["source"] == "measured"
    for name in ("fullkv", "zipage"):
        e = r[name]
        assert e["output_tokens_per_s"] > 0 and e["pool_tokens"] == 512
        assert {"roofline_fraction", "mean_running", "preemptions"} <= set(e)
    assert r["speedup"] == pytest.approx(r["zipage"]["output_tokens_per_s"]
                                         / r["fullkv"]["output_tokens_per_s"])
    assert r["results"][0]["engine"] == "full"  # the raw results stay


def test_validate_reproduces_the_measured_counts(measured, capsys):
    d, report, trace, cal = measured
    table, out = d / "validation.md", d / "validation.json"
    rc = bench.main(["simulate", "--validate", str(report), "--cost", str(cal), "--trace",
                     str(trace), "--markdown", str(table), "--json", str(out)])
    assert rc in (0, 1)  # 1: outside ±10% (CPU timings of a shared machine)
    rows = json.loads(out.read_text())["validation"][0]["rows"]
    engines = {r["engine"]: r for r in rows}
    assert set(engines) == {"fullkv", "zipage", "speedup"}
    for name in ("fullkv", "zipage"):
        r = engines[name]
        for k in ("steps", "preemptions", "compressions"):
            assert r[f"{k}_measured"] == r[f"{k}_predicted"], (name, k)
        assert r["predicted_tok_s"] > 0
    assert (rc == 0) == all(r["within_tolerance"] for r in rows)
    assert "| zipage |" in table.read_text()
    assert "cost model on the measured steps" in capsys.readouterr().out


def test_refit_to_a_trace(measured):
    d, _, trace, cal = measured
    out = d / "refit.json"
    assert bench.main(["calibrate", "--from-trace", str(trace), "--base", str(cal),
                       "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["models"]["zipage/b16"]["meta"]["fitted_to"] == "traces"


def test_predict_a_workload(tmp_path):
    out = tmp_path / "sim.json"
    assert bench.main(["simulate", "--fixed-cost", "--model", "qwen3-1.7b", "--num-requests",
                       "12", "--output-len", "200", "--budget", "64", "--block-size", "16",
                       "--kv-cache-tokens", "2048", "--max-num-seqs", "12", "--json",
                       str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["source"] == "simulated" and r["output_len"] == 200
    assert r["fullkv"]["preemptions"] > 0 and r["zipage"]["compressions"] > 0
    assert r["fullkv"]["output_tokens"] == r["zipage"]["output_tokens"] == 12 * 200


def test_paper_sweep_writes_reports_and_plot(tmp_path, measured):
    _, report, _, _ = measured
    plot, out = tmp_path / "speedup.png", tmp_path / "paper.json"
    # the paper workload (mean 300, budget 256) is one of the sweep's: 6 simulations
    assert bench.main(["simulate", "--paper", "--fixed-cost", "--num-requests", "32",
                       "--measured", str(report), "--mean-output-len", "300", "--budget", "256",
                       "--sweep-means", "300", "--sweep-budgets", "256", "--gpu-memory-gib",
                       "80", "--plot", str(plot), "--json", str(out), "--jobs", "2"]) == 0
    data = json.loads(out.read_text())
    assert plot.stat().st_size > 10_000
    assert set(data["reports"]) == {"paper", "paper_40GiB", "paper_80GiB", "mean300_budget256"}
    assert data["measured_points"][0]["predicted"] is None  # no calibration: no prediction
    small, big = data["reports"]["paper_40GiB"], data["reports"]["paper_80GiB"]
    assert small["fullkv"]["pool_tokens"] < big["fullkv"]["pool_tokens"]
    assert data["reports"]["paper"]["output_len"]["kind"] == "capped_lognormal"
    # redraw with another measured run (drawn lengths: plotted at their mean), no new sweep
    staggered = tmp_path / "staggered.json"
    assert bench.main(["long", "--cpu-smoke", "--mean-output-len", "50", "--json",
                       str(staggered)]) == 0
    replot = tmp_path / "replot.png"
    assert bench.main(["simulate", "--fixed-cost", "--replot", str(out), "--measured",
                       str(report), str(staggered), "--plot", str(replot)]) == 0
    points = json.loads(out.read_text())["measured_points"]
    drawn = json.loads(staggered.read_text())["output_len"]["drawn_mean"]
    assert [p["x"] for p in points] == [96, drawn] and replot.stat().st_size > 10_000
    assert json.loads(out.read_text())["curves"] == data["curves"]
    with pytest.raises(SystemExit, match="not the --json of a `simulate --paper` run"):
        bench.main(["simulate", "--fixed-cost", "--replot", str(staggered)])


def test_a_crash_in_a_later_config_keeps_the_finished_ones(tmp_path, monkeypatch):
    """On the H200 a CUDA error in the fourth config lost the three measured before it."""
    from scripts.sim import calibrate
    real, calls = calibrate.calibrate_config, []

    def second_one_dies(a, text, *args):
        calls.append(text)
        if len(calls) == 2:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return real(a, text, *args)

    monkeypatch.setattr(calibrate, "calibrate_config", second_one_dies)
    out = tmp_path / "cal.json"
    with pytest.raises(RuntimeError, match="illegal memory access"):
        bench.main(["calibrate", "--cpu-smoke", "--out", str(out), "--warmup", "0",
                    "--sync-reps", "1", "--reps", "2", "--host-steps", "20"])
    data = json.loads(out.read_text())
    assert list(data["models"]) == calls[:1] and data["complete"] is False


def test_a_probe_times_only_the_named_points_and_is_not_a_cost_model(tmp_path):
    from zipage.sim.calibration_file import Calibration
    out = tmp_path / "probe.json"
    assert bench.main(["calibrate", "--cpu-smoke", "--configs", "fullkv/b16", "--only",
                       "decode 8x128", "--out", str(out), "--warmup", "0", "--sync-reps", "1",
                       "--reps", "2"]) == 0
    data = json.loads(out.read_text())
    assert [g["name"] for g in data["raw"]["fullkv/b16"]["grid"]] == ["decode 8x128"]
    assert data["models"] == {} and data["workload"]["inputs"] == "random"
    with pytest.raises(ValueError, match="not a calibration file"):
        Calibration(str(out))
    with pytest.raises(SystemExit, match="no fullkv/b16 grid point matches; its points are: "
                                         "decode 1x128"):
        bench.main(["calibrate", "--cpu-smoke", "--configs", "fullkv/b16", "--only", "decode 9x",
                    "--out", str(tmp_path / "none.json")])


def test_staggered_lengths_are_measured_and_replayed_exactly(measured, tmp_path):
    """A run whose requests end at drawn lengths (finishing at different steps, so most
    Zipage steps compress some request): the simulation replays the same lengths."""
    _, _, _, cal = measured
    report, out = tmp_path / "staggered.json", tmp_path / "v.json"
    assert bench.main(["long", "--cpu-smoke", "--mean-output-len", "50", "--seed", "3",
                       "--json", str(report)]) == 0
    length = json.loads(report.read_text())["output_len"]
    assert length["kind"] == "capped_lognormal" and length["cap"] == 96
    assert len(length["lengths"]) == 4 and len(set(length["lengths"])) > 1
    tokens = sum(length["lengths"])
    assert bench.main(["simulate", "--validate", str(report), "--cost", str(cal),
                       "--json", str(out)]) in (0, 1)
    rows = {r["engine"]: r for r in json.loads(out.read_text())["validation"][0]["rows"]}
    for name in ("fullkv", "zipage"):
        for k in ("steps", "preemptions", "compressions"):
            assert rows[name][f"{k}_measured"] == rows[name][f"{k}_predicted"], (name, k)
    predicted = json.loads(out.read_text())["validation"][0]["predicted"]
    assert predicted["zipage"]["output_tokens"] == tokens


@pytest.mark.parametrize("args, message", [
    (["long", "--cpu-smoke", "--mean-output-len", "200"], "above the cap 96"),
    (["simulate", "--fixed-cost", "--paper", "--max-output-len", "8192", "--sweep-means", "2048"],
     "mean output 16384 is above the cap --max-output-len 8192"),
    (["simulate", "--fixed-cost", "--paper", "--output-len", "100"], "--paper draws its lengths"),
])
def test_length_options_that_cannot_hold_are_refused(args, message):
    with pytest.raises(SystemExit, match=message):
        bench.main(args)


def test_parallel_jobs_come_back_in_job_order_and_each_is_logged(monkeypatch):
    import time
    from zipage.sim import paper

    def fake_simulate(n, **_):
        time.sleep(0.05 * n)  # the first job finishes last
        return {"output_tokens_per_s": float(n), "simulation_cpu_s": 0.0}

    monkeypatch.setattr(paper, "simulate", fake_simulate)
    lines = []
    jobs = [{"label": f"job n={n}", "n": n} for n in (6, 1, 3)]
    results = paper.run_jobs(jobs, processes=2, log=lines.append)
    assert [r["output_tokens_per_s"] for r in results] == [6.0, 1.0, 3.0]
    assert [line.split("] ")[0].strip() for line in lines] == ["[1/3", "[2/3", "[3/3"]
    assert lines[0].startswith("  [1/3] job n=1:")


def test_without_cost_the_h200_calibration_is_used_and_the_others_named(tmp_path):
    from scripts.sim.simulate import default_calibration
    for card in ("h100", "h200"):
        (tmp_path / f"step_cost_{card}_qwen3-8b.json").write_text("{}")
    chosen, others = default_calibration("qwen3-8b", str(tmp_path))
    assert chosen == f"{tmp_path}/step_cost_h200_qwen3-8b.json"
    assert others == [f"{tmp_path}/step_cost_h100_qwen3-8b.json"]
    (tmp_path / "step_cost_a100_smollm2.json").write_text("{}")
    assert default_calibration("smollm2", str(tmp_path)) == (
        f"{tmp_path}/step_cost_a100_smollm2.json", [])


def test_several_calibrations_without_the_h200_one_are_refused(tmp_path):
    from scripts.sim.simulate import default_calibration
    for card in ("h100", "a100"):
        (tmp_path / f"step_cost_{card}_qwen3-8b.json").write_text("{}")
    with pytest.raises(SystemExit, match="no single calibration for qwen3-8b"):
        default_calibration("qwen3-8b", str(tmp_path))
    with pytest.raises(SystemExit, match="none found"):
        default_calibration("llama", str(tmp_path))


def test_from_another_directory_the_checkouts_calibrations_are_found(tmp_path, monkeypatch):
    """`zipage-bench simulate` run outside the checkout said "none found": it looked only in
    ./results/bench. A ./results/bench holding one for the model still comes first."""
    from scripts.sim.simulate import CHECKOUT_BENCH, default_calibration
    monkeypatch.chdir(tmp_path)
    chosen, _ = default_calibration("qwen3-8b")
    assert chosen == f"{CHECKOUT_BENCH}/step_cost_h200_qwen3-8b.json" and os.path.exists(chosen)
    (tmp_path / "results" / "bench").mkdir(parents=True)
    (tmp_path / "results" / "bench" / "step_cost_a100_qwen3-8b.json").write_text("{}")
    assert default_calibration("qwen3-8b") == ("results/bench/step_cost_a100_qwen3-8b.json", [])
