"""The decision rule of `python -m scripts.bench fidelity decide` (scripts/fidelity/decide.py)."""
import json

import pytest

from scripts import bench
from scripts.fidelity import decide as fd


def result(tmp_path, name, deltas, paired=None, block=256, budgets=(1024, 2048)):
    """A results JSON: deltas = {method: delta NLL (or (delta, se)) at every budget}."""
    summ = {}
    for m, d in deltas.items():
        d, se = d if isinstance(d, tuple) else (d, 0.001)
        for B in budgets:
            summ[f"{m}@{B}"] = dict(delta_nll=d, delta_nll_se=se)
    pairs = {}
    for (a, b), (mean, se) in (paired or {}).items():
        for B in budgets:
            pairs[f"{a}|{b}@{B}"] = dict(mean=mean, se=se)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(dict(args=dict(block_size=block, budgets=list(budgets)),
                                    summaries=summ, paired=pairs)))
    return str(path)


def test_the_lowest_mean_increase_wins_when_clearly_better(tmp_path):
    r = result(tmp_path, "fidelity_b256_tuning", {"default": 0.03, "rw=0.5": 0.01, "attn": 0.02},
               paired={("rw=0.5", "attn"): (-0.01, 0.001), ("default", "rw=0.5"): (0.02, 0.001)})
    c = fd.choose([fd.load(r)])
    assert (c["best"], c["chosen"]) == ("rw=0.5", "rw=0.5")
    assert c["ties"] == ["rw=0.5"]


def test_a_simpler_score_within_one_paired_se_of_the_best_is_chosen(tmp_path):
    r = result(tmp_path, "t", {"rw=0.5": 0.0100, "attn": 0.0104, "default": 0.0101},
               paired={("rw=0.5", "attn"): (-0.0004, 0.001),
                       ("default", "rw=0.5"): (0.0001, 0.001)})
    c = fd.choose([fd.load(r)])
    assert c["best"] == "rw=0.5" and set(c["ties"]) == {"rw=0.5", "attn", "default"}
    assert c["chosen"] == "attn"  # simplest of the tied


def test_among_tied_full_scores_the_current_default_is_kept(tmp_path):
    r = result(tmp_path, "t", {"rw=0.5": 0.0100, "default": 0.0101, "attn": 0.05},
               paired={("default", "rw=0.5"): (0.0001, 0.001), ("rw=0.5", "attn"): (-0.04, 0.001)})
    assert fd.choose([fd.load(r)])["chosen"] == "default"


def test_without_pairs_the_unpaired_se_decides_and_a_missing_cell_drops_a_candidate(tmp_path):
    r = result(tmp_path, "t", {"rw=0.5": (0.010, 0.001), "attn": (0.013, 0.001)})
    data = fd.load(r)
    c = fd.choose([data])
    assert c["chosen"] == "rw=0.5"  # 0.003 apart, unpaired SE 0.0014: no tie
    data["summaries"]["attn_global@1024"] = dict(delta_nll=0.0, delta_nll_se=0.001)
    assert "attn_global" in fd.choose([data])["dropped"]  # no budget-2048 cell


def test_tuning_selects_test_reports_and_failed_checks_are_said(tmp_path):
    tune = result(tmp_path, "fidelity_b256_tuning", {"rw=0.5": 0.01, "attn": 0.02},
                  paired={("rw=0.5", "attn"): (-0.01, 0.001)})
    test = result(tmp_path, "fidelity_b256_solutions",
                  {"rw=0.5": 0.03, "attn": 0.02, "recent": 0.025, "random": 0.2},
                  paired={("rw=0.5", "recent"): (0.005, 0.001), ("rw=0.5", "random"): (-0.17, 0.01),
                          ("rw=0.5", "attn"): (0.01, 0.001), ("attn", "recent"): (-0.005, 0.001),
                          ("attn", "random"): (-0.18, 0.01)})
    other_block = result(tmp_path, "fidelity_b16_tuning", {"attn": 0.0}, block=16)
    chosen, lines = fd.decide([test, tune, other_block])
    text = "\n".join(lines)
    assert chosen == "rw=0.5"  # selected on the tuning texts, though worse on the test texts
    assert "Selecting on tuning texts: fidelity_b256_tuning" in text
    assert "vs recent (lower NLL) +0.0050 ± 0.0010: NOT MET" in text
    assert "does NOT meet" in text and "candidates that do: attn" in text
    assert text.splitlines()[-1].startswith("RECOMMENDED DEFAULT: `rw=0.5` (use_global_score=True")


def test_decide_is_a_subcommand_of_bench_and_writes_only_its_out_file(tmp_path, capsys):
    r = result(tmp_path, "fidelity_b256_solutions", {"attn": 0.01, "default": 0.03},
               paired={("default", "attn"): (0.02, 0.001)})
    out = tmp_path / "decision.md"
    assert bench.main(["fidelity", "decide", r, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Selecting on TEST texts" in printed
    assert "RECOMMENDED DEFAULT: `attn` (use_global_score=False, use_pooling=False, " \
           "redundancy='none'" in printed
    assert "RECOMMENDED DEFAULT" in out.read_text()
    with pytest.raises(ValueError, match="block size 64"):
        fd.decide([r], block_size=64)
