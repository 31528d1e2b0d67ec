"""`bench fp8-flat-splits` (scripts/throughput/fp8_flat_splits.py): the split counts it times
and the rules it compares, end to end in the Triton interpreter."""
import json
import os
import subprocess
import sys
from pathlib import Path

from scripts.throughput.fp8_flat_splits import fill_splits, summary

ROOT = Path(__file__).resolve().parents[2]


def test_fill_gives_every_resident_program_an_item():
    assert fill_splits(rows=512, kv_heads=8, programs=396, max_tiles=16) == 1
    assert fill_splits(rows=32, kv_heads=8, programs=396, max_tiles=128) == 2  # 256 items
    assert fill_splits(rows=8, kv_heads=8, programs=396, max_tiles=256) == 7
    assert fill_splits(rows=1, kv_heads=8, programs=396, max_tiles=256) == 8  # at most 8
    assert fill_splits(rows=1, kv_heads=8, programs=396, max_tiles=3) == 3  # at most the tiles


def test_summary_compares_rules_with_the_fastest_right_output():
    def row(splits, ms, rules=(), correct=True):
        return dict(rows=64, ctx=4096, launch="128x4", splits=splits, ms=ms, rules=list(rules),
                    correct=correct, pct_roofline=90.0)
    rows = [row(1, 1.0, ["fill"]), row(2, 0.5, correct=False), row(3, 1.25, ["balance"])]
    line = summary(rows)[1]
    assert line.split()[4] == "1"  # best splits: the wrong-output row is not the best
    assert "3, 0.800" in line and "1, 1.000" in line
    rows[0]["correct"] = False
    assert "1, wrong" in summary(rows)[1]


def test_cpu_smoke_times_every_split_count_and_both_rules(tmp_path):
    out = tmp_path / "splits.json"
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-m", "scripts.bench", "fp8-flat-splits",
                           "--cpu-smoke", "--launches", "16x4", "--json", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(out.read_text())
    for rows, ctx in ((3, 48), (1, 80)):
        mine = [r for r in data["rows"] if (r["rows"], r["ctx"]) == (rows, ctx)]
        tiles = -(-(ctx + 16) // 16)  # the table has one spare block column
        assert [r["splits"] for r in mine] == list(range(1, min(8, tiles) + 1))
        assert all(r["correct"] for r in mine), mine
        assert sum("balance" in r["rules"] for r in mine) == 1
        assert sum("fill" in r["rules"] for r in mine) == 1
    assert "balance: splits, vs best" in proc.stdout


def test_bad_launch_text_is_refused():
    proc = subprocess.run([sys.executable, "-m", "scripts.bench", "fp8-flat-splits",
                           "--cpu-smoke", "--launches", "128"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "--launches" in proc.stderr
