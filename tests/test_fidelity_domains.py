"""Issue 31's fidelity study on the CPU at toy sizes: the long-generation domain, the per-domain
cells and the rule that decides the default."""
import gzip
import json
import os
import subprocess
import sys

import pytest

from scripts.fidelity import methods as fm
from scripts.fidelity.domain_report import nominate, wins_everywhere
from scripts.fidelity.long_generations import keep_one, select_texts, split_problems

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.environ.get("ZIPAGE_DATA_DIR", os.path.join(ROOT, "..", "shared", "datasets"))


def test_split_is_fixed_by_seed_and_disjoint():
    ids = [f"p{i}" for i in range(30)]
    a, b = split_problems(ids, 31, 1 / 3), split_problems(list(reversed(ids)), 31, 1 / 3)
    assert a == b and len(a["tuning"]) == 10 and len(a["test"]) == 20
    assert not set(a["tuning"]) & set(a["test"]) and set(a["tuning"]) | set(a["test"]) == set(ids)
    assert split_problems(ids, 32, 1 / 3) != a


def test_one_whole_trajectory_per_problem():
    assert keep_one([[1] * 10, [2] * 40, [3] * 50], 40) == (1, [2] * 40)
    assert keep_one([[1] * 10], 40) is None
    kept = {"a": dict(prompt_ids=[7] * 5, token_ids=[1] * 20),
            "b": dict(prompt_ids=[7] * 5, token_ids=[2] * 3),  # too short for a text
            "c": dict(prompt_ids=[8] * 2, token_ids=[3] * 30)}
    texts = select_texts(["b", "c", "a"], kept, 12, 5)
    assert [t["problem"] for t in texts] == ["c", "a"]
    assert texts[0]["ids"] == [8, 8] + [3] * 10 and texts[0]["prompt_tokens"] == 2


def _summary(vs):
    """(domain, 'test', budget, method) -> a cell with the given paired difference."""
    out = {}
    for (d, B, m), (mean, se) in vs.items():
        out[d, "test", B, m] = dict(delta=(0.01, 0.001), vs_default=(mean, se))
        out[d, "tuning", B, m] = dict(delta=(0.01 + mean, 0.001))
    return out


def test_the_rule_needs_a_win_beyond_two_se_in_every_cell():
    doms, budgets = ["x", "y"], [1024, 2048]
    everywhere = {(d, B, "attn_recent"): (-0.01, 0.002) for d in doms for B in budgets}
    s = _summary(everywhere)
    assert wins_everywhere(s, "attn_recent", doms, budgets) == (True, [])
    one_miss = {**everywhere, ("y", 2048, "attn_recent"): (-0.003, 0.002)}  # within 2 SE
    ok, misses = wins_everywhere(_summary(one_miss), "attn_recent", doms, budgets)
    assert not ok and misses == ["y@2048: -0.0030 ± 0.0020"]
    both = {**everywhere, **{(d, B, "h2o"): (-0.02, 0.001) for d in doms for B in budgets},
            **{(d, B, "random"): (-0.5, 0.001) for d in doms for B in budgets}}
    assert nominate(_summary(both), doms, budgets, [fm.DEFAULT, "attn_recent", "h2o",
                                                     "random"]) == "h2o"  # never random


@pytest.mark.slow
def test_the_long_generation_domain_is_built_on_the_cpu(tmp_path):
    env = dict(os.environ, ZIPAGE_DATA_DIR=DATA, PYTHONPATH=ROOT)
    gen = tmp_path / "long_generations"
    subprocess.run([sys.executable, "-m", "scripts.bench", "long-generations", "--device", "cpu",
                    "--limit", "1", "--samples", "1", "--max-model-len", "320",
                    "--min-tokens", "16", "--text-tokens", "160", "--texts-per-split", "1", "1",
                    "--out", str(gen)], check=True, cwd=ROOT, env=env)
    with gzip.open(f"{gen}.json.gz", "rt") as f:
        built = json.load(f)
    assert len(built["lengths"]) == 4 and set(built["split"]) == {"tuning", "test"}
    assert sum(map(len, built["split"].values())) == 4
    for split in ("tuning", "test"):
        for t in built["texts"][split]:
            assert len(t["ids"]) == 160 and t["problem"] in built["split"][split]
    assert "kept trajectories" in (tmp_path / "long_generations.md").read_text()


@pytest.mark.slow
def test_toy_study_per_domain(tmp_path):
    """Two methods on three domains at toy sizes (a made-up long-generation file), tabulated
    with the rule."""
    import random
    rng = random.Random(0)
    gen = tmp_path / "gen.json.gz"
    with gzip.open(gen, "wt") as f:
        json.dump({"texts": {s: [{"problem": f"{s}0", "prompt_tokens": 20,
                                  "ids": [rng.randrange(100, 20000) for _ in range(96)]}]
                             for s in ("tuning", "test")}}, f)
    env = dict(os.environ, ZIPAGE_DATA_DIR=DATA, PYTHONPATH=ROOT)
    out = tmp_path / "domains"
    subprocess.run([sys.executable, "-m", "scripts.bench", "fidelity-domains", "--device", "cpu",
                    "--generations", str(gen), "--texts-per-split", "1", "1",
                    "--text-tokens", "96", "--block-size", "16", "--budgets", "32",
                    "--methods", "default", "attn_recent", "--out", str(out)],
                   check=True, cwd=ROOT, env=env)
    report = json.loads((tmp_path / "domains.json").read_text())
    cells = {(c["domain"], c["split"], c["budget"], c["method"]) for c in report["cells"]}
    assert len(cells) == 3 * 2 * 1 * 2  # domains x splits x budgets x methods
    assert report["candidate"] == "attn_recent"
    md = (tmp_path / "domains.md").read_text()
    assert "## long_generations" in md and "Verdict:" in md
