"""The benchmark CLI (`python -m scripts.bench`): every subcommand parses, the model-free one
runs for real, and the CPU smoke paths of the engine benchmarks still run end to end."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import bench

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "scripts.bench", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def test_top_level_help_lists_every_subcommand():
    r = run_cli("--help")
    assert r.returncode == 0, r.stderr
    for name in bench.SUBCOMMANDS:
        assert name in r.stdout


@pytest.mark.parametrize("name", list(bench.SUBCOMMANDS))
def test_every_subcommand_help_runs(name, capsys):
    # in-process (one interpreter for all): the module imports and its options build
    with pytest.raises(SystemExit) as done:
        bench.main([name, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: python -m scripts.bench {name}")
    assert "--help" in out


def test_fidelity_decide_is_also_spelled_as_two_words(capsys):
    with pytest.raises(SystemExit) as done:
        bench.main(["fidelity", "decide", "--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("usage: python -m scripts.bench fidelity-decide")


def test_help_imports_only_the_chosen_subcommand():
    code = ("import sys; from scripts import bench; bench.build_parser('host'); "
            "print(sorted(m for m in sys.modules if m.startswith('scripts.')))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    loaded = eval(r.stdout)
    assert "scripts.throughput.host" in loaded
    others = {module for module, _ in bench.SUBCOMMANDS.values()} - {"scripts.throughput.host"}
    assert not others & set(loaded)


def test_unknown_module_gives_a_clear_error(monkeypatch):
    monkeypatch.setitem(bench.SUBCOMMANDS, "ghost", ("scripts.no_such_benchmark", "x"))
    with pytest.raises(SystemExit, match="scripts.no_such_benchmark is not in this checkout"):
        bench.main(["ghost", "--help"])


def test_unknown_option_is_rejected():
    r = run_cli("host", "--num-request", "8")
    assert r.returncode == 2 and "unrecognized arguments" in r.stderr


def test_host_runs_and_writes_json(tmp_path):
    out = tmp_path / "host.json"
    # prompt 128 > cap (64/32 + 1) * 32 = 96: requests compress right after prefill, then
    # every 32 steps
    r = run_cli("host", "--num-requests", "4", "8", "--steps", "40", "--warmup", "2",
                "--budget", "64", "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "== environment" in r.stdout and "ratio 8 / 4 requests" in r.stdout
    result = json.loads(out.read_text())
    assert result["workload"]["budget"] == 64
    for n in ("4", "8"):
        row = result["per_step_ms"][n]
        assert row["total"] > 0 and row["compressions_per_step"] > 0


def test_host_rejects_budget_off_the_block_grid():
    r = run_cli("host", "--budget", "100")
    assert r.returncode != 0 and "multiple of --block-size" in r.stderr


def test_long_cpu_smoke(tmp_path):
    out = tmp_path / "long.json"
    r = run_cli("long", "--cpu-smoke", "--json", str(out))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    result = json.loads(out.read_text())
    by_engine = {x["engine"]: x for x in result["results"]}
    assert by_engine["zipage"]["stats"]["num_compressions"] > 0
    assert by_engine["full"]["stats"]["num_compressions"] == 0
    # Zipage holds at most (C + 1) * b = (32 / 16 + 1) * 16 tokens per request
    assert by_engine["zipage"]["peak_kv_tokens_per_request"] <= 48
    assert "ratio zipage / full KV" in r.stdout


def test_throughput_cpu_smoke_matches_transformers(tmp_path):
    out = tmp_path / "throughput.json"
    r = run_cli("throughput", "--cpu-smoke", "--num-requests", "4", "--json", str(out))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["identical_to_hf"] == 4  # same tiny checkpoint, greedy
    assert result["ours"]["bad_requests"] == 0 and result["ratio"] > 0


@pytest.mark.parametrize("argv, says", [
    (["gemm", "--seconds", "0"], "seconds, more than 0"),       # no loop: divided by zero reps
    (["gemm", "--seconds", "-1"], "seconds, more than 0"),
    (["calibrate", "--sustain-s", "-0.5"], "seconds, 0 or more"),
    (["calibrate", "--sustain-s", "inf"], "a finite number"),
    (["fp8-kernels", "--energy", "inf"], "a finite number"),   # looped forever
    (["fp8-kernels", "--energy", "nan"], "a finite number"),
    (["fp8-energy-choice", "sweep.json", "--margin", "nan"], "a finite number"),
    (["fp8-energy-choice", "sweep.json", "--margin", "1"], "a fraction in [0, 1)"),
    (["long", "--num-requests", "0"], "1 or more"),
    (["long", "--block-size", "-16"], "1 or more"),
    (["long", "--temperature", "-1"], "0 or more (0 = greedy)"),  # was a traceback
    (["long", "--sigma", "0"], "more than 0"),
    (["throughput", "--kv-cache-gib", "-1"], "more than 0"),       # was a traceback
    (["throughput", "--gpu-memory-utilization", "1.5"], "a fraction in (0, 1]"),
    (["throughput", "--num-requests", "-1"], "0 or more"),         # 0 = fill the pool
    (["simulate", "--num-requests", "1e3"], "not a whole number"),
    (["calibrate", "--rows", "0", "8"], "1 or more"),
    (["calibrate", "--warmup", "-1"], "0 or more"),
    (["agreement", "--skip-problems", "-3"], "0 or more"),      # was refused after loading data
    (["agreement", "--window", "0"], "1 or more"),
    (["long-generations", "--out", "x", "--limit", "-1"], "1 or more"),  # dropped the last one
    (["long-generations", "--out", "x", "--tuning-share", "1"], "a fraction in (0, 1)"),
    (["fidelity-gpu", "--max-wall-s", "-5"], "seconds, more than 0"),
    (["fidelity-gpu", "--mem-limit-gb", "0"], "more than 0"),
    (["fidelity-domains", "--max-wall-s", "nan"], "seconds, more than 0 (inf: no limit)"),
    (["profile", "--budget", "-256"], "0 or more"),               # 0 = Full KV
    (["simulate", "--decode-programs-per-sm", "0"], "1 or more"),
])
def test_seconds_and_fractions_out_of_range_exit_2_with_the_reason(argv, says, capsys):
    with pytest.raises(SystemExit) as done:
        bench.main(argv)
    assert done.value.code == 2 and says in capsys.readouterr().err


def test_seconds_and_fractions_in_range_are_kept():
    from scripts.arg_types import (fraction_below_one, open_fraction, positive_seconds,
                                   seconds_or_zero, time_limit)
    assert seconds_or_zero("0") == 0.0 and positive_seconds("0.25") == 0.25
    assert fraction_below_one("0.02") == 0.02 and fraction_below_one("0") == 0.0
    assert time_limit("inf") == float("inf") and time_limit("400") == 400.0
    assert open_fraction("0.33") == 0.33


def test_cpu_smoke_says_which_sizes_it_replaces(capsys):
    """`long --cpu-smoke --num-requests 8` ran 4 requests without a word; so did an explicit
    `--num-requests 128`, the option's default."""
    import argparse
    from scripts.throughput.long import add_arguments
    from scripts.throughput.long_workload import CPU_SMOKE_SIZES, DEFAULT_SIZES, resolve_sizes
    p = argparse.ArgumentParser()
    add_arguments(p)
    asked = p.parse_args(["--cpu-smoke", "--num-requests", "8", "--budget", "32",
                          "--output-len", "8192"])
    resolve_sizes(asked)
    said = capsys.readouterr().out
    assert "--num-requests 8 -> 4" in said and "--output-len 8192 -> 96" in said
    assert "--budget" not in said
    assert {k: getattr(asked, k) for k in CPU_SMOKE_SIZES} == CPU_SMOKE_SIZES
    resolve_sizes(p.parse_args(["--cpu-smoke"]))
    assert capsys.readouterr().out == ""
    plain = p.parse_args(["--budget", "1024"])
    resolve_sizes(plain)
    assert {k: getattr(plain, k) for k in DEFAULT_SIZES} == dict(DEFAULT_SIZES, budget=1024)


@pytest.mark.parametrize("argv, says", [
    (["long", "--num-request", "5"], "--num-request (did you mean --num-requests?) 5"),
    (["simulate", "--cots=x.json"], "--cots=x.json (did you mean --cost?)"),
    (["long", "--zzz"], "unrecognized arguments: --zzz"),
])
def test_a_misspelled_option_exits_2_naming_the_closest_one(argv, says, capsys):
    with pytest.raises(SystemExit) as done:
        bench.main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2 and says in err
    assert f"python -m scripts.bench {argv[0]}: error" in err  # the subcommand's usage


@pytest.mark.parametrize("argv, says", [
    (["long", "--budget", "100"],
     "engine zipage: budget must be a positive multiple of block_size (256), got 100"),
    (["long", "--engines", "full", "snapkv", "--budget", "16", "--block-size", "16"],
     "engine snapkv: observation_window 32 + num_sink_tokens 0 exceed the budget 16: raise "
     "the budget"),
    (["long", "--engines", "full", "--block-size", "24"],
     "engine full: block_size must be a power of two >= 16, got 24"),
    (["simulate", "--budget", "100", "--num-requests", "4", "--output-len", "512"],
     "engine zipage: budget must be a positive multiple of block_size (256), got 100"),
    (["throughput", "--cpu-smoke", "--budget", "100"],  # Hugging Face's run came first
     "engine zipage: budget must be a positive multiple of block_size (16), got 100"),
])
def test_engine_options_the_engine_refuses_fail_before_any_engine_runs(argv, says):
    """`long --budget 100` ran Full KV (minutes on a GPU) before the Zipage engine refused the
    budget with a traceback; `simulate` ran its Full KV simulation first, `throughput` its
    Hugging Face baseline."""
    r = run_cli(*argv)
    assert r.returncode == 1 and r.stderr.strip().splitlines()[-1] == f"error: {says}"
    assert "Traceback" not in r.stderr
    assert "== environment" not in r.stdout and "tok/s" not in r.stdout  # nothing ran


def test_a_model_too_large_for_the_host_is_one_error_line(monkeypatch, capsys):
    """`bench long` on a CPU machine with the default qwen3-8b shape: the sizes and what to do,
    exit 1, no traceback."""
    import zipage.models.loader as loader
    monkeypatch.setattr(loader, "available_host_bytes", lambda: 10 * 10**9)
    assert bench.main(["long", "--engines", "full", "--num-requests", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: qwen3-8b: its weights take 32.8 GB in float32, more than the "
                          "10.0 GB") and err.count("\n") == 1


@pytest.mark.parametrize("module", ["nll", "agreement", "domains", "long_generations"])
def test_a_fidelity_out_path_names_its_stem_with_or_without_an_extension(module):
    """--out x.json wrote x.json.json and x.json.md."""
    import argparse
    import importlib
    ap = argparse.ArgumentParser()
    importlib.import_module(f"scripts.fidelity.{module}").add_arguments(ap)
    for given in ("runs/x", "runs/x.json", "runs/x.md", "runs/x.json.gz"):
        assert ap.parse_args(["--out", given]).out == "runs/x"
