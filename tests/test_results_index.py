"""results/ holds what results/README.md lists, and every results/ path that README.md or
docs/ cite exists: a figure never points at a file that is gone."""
import glob
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# a path as the docs write it: results/bench/x.json, results/agreement_*_h200.md,
# results/bench/{val_a4k,val_b8k}.json
CITED = re.compile(r"results/[\w.*{},/-]+")


def committed_results() -> set[str]:
    """Files under results/ that git tracks (a user's run folders there are ignored)."""
    if not shutil.which("git") or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "results"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    return {line.removeprefix("results/") for line in out.splitlines()}


def listed_in_readme() -> set[str]:
    """The backquoted paths of the first column of results/README.md's tables."""
    listed = set()
    for line in (ROOT / "results/README.md").read_text().splitlines():
        if line.startswith("| `"):
            listed |= set(re.findall(r"`([^`]+)`", line.split(" | ")[0]))
    return listed


def expand(path: str) -> list[str]:
    """Brace alternatives, as a shell expands them: a{b,c}d -> abd, acd."""
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [x for alt in m.group(1).split(",")
            for x in expand(path[:m.start()] + alt + path[m.end():])]


def test_every_results_file_is_listed_and_every_listed_file_exists():
    committed, listed = committed_results(), listed_in_readme()
    assert "README.md" in committed
    unlisted = sorted(committed - listed - {"README.md"})
    assert not unlisted, f"in results/ but not in results/README.md: {unlisted}"
    missing = sorted(p for p in listed if not (ROOT / "results" / p).is_file())
    assert not missing, f"listed in results/README.md but not in results/: {missing}"


def test_every_results_path_cited_in_the_docs_exists():
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = []
    for doc in docs:
        for cited in CITED.findall(doc.read_text()):
            cited = cited.rstrip(".,")
            if "." not in Path(cited).name:  # a folder: run folders and outputs, not evidence
                continue
            for path in expand(cited):
                if not glob.glob(str(ROOT / path)):
                    missing.append(f"{doc.relative_to(ROOT)}: {path}")
    assert not missing, "cited but not in results/:\n" + "\n".join(missing)


def test_brace_expansion_of_cited_paths():
    assert expand("results/x_{a,b}.{md,json}") == [
        "results/x_a.md", "results/x_a.json", "results/x_b.md", "results/x_b.json"]
