"""The answer-metric lines of the printed report (tasks/report.py): maj@k per k with its
standard error, the agreement with Full KV (next to accuracy retained) and accuracy by output
length, each for the run and, for a compressed run, its Full-KV baseline."""
from __future__ import annotations

LABEL = 8  # the least width of the row labels ("Zipage", "Full KV"), as in the pass@1 table
PUBLISHED_ZIPAGE = ("zipage", "zipage_paper")  # engine names of the published Zipage score


def run_label(s: dict) -> str:
    """The run's row label: "Full KV", "Zipage" for the published score, else the engine's
    name (engine=snapkv is labelled snapkv, not Zipage)."""
    if s.get("budget") is None:
        return "Full KV"
    return "Zipage" if s.get("engine") in PUBLISHED_ZIPAGE else str(s.get("engine"))


def label_width(s: dict) -> int:
    return max(LABEL, len(run_label(s)))


def _rows(s: dict) -> list[tuple[str, dict]]:
    """(label, the numbers) of the run, then its baseline's (compressed runs only)."""
    if s.get("budget") is None:
        return [("Full KV", s)]
    return [(run_label(s), s), ("Full KV", s.get("baseline") or {})]


def _table(title: str, heads: list[str], rows: list[tuple[str, list[str]]]) -> list[str]:
    width = max([len(h) for h in heads] + [len(c) for _, cells in rows for c in cells])
    label = max([LABEL] + [len(name) for name, _ in rows])
    out = [f"{title:{label}} " + "  ".join(f"{h:>{width}}" for h in heads)]
    return out + [f"{name:{label}} " + "  ".join(f"{c:>{width}}" for c in cells)
                  for name, cells in rows]


def maj_lines(s: dict) -> list[str]:
    """maj@k per k (mean ± stderr across problems), or why there is none."""
    if "maj@k" not in s:  # a summary scored before these metrics
        return []
    if s["maj@k"] is None:
        return ["maj@k n/a (code)"]
    ks = sorted(s["maj@k"], key=int)

    def cell(m: dict | None, k: str) -> str:
        v = (m or {}).get(k) or {}
        if v.get("mean") is None:
            return "n/a"
        se = v.get("stderr")
        return f"{v['mean']:.4f}" + ("" if se is None else f" ± {se:.4f}")
    return _table("maj@k", [f"@{k}" for k in ks],
                  [(label, [cell(x.get("maj@k"), k) for k in ks]) for label, x in _rows(s)])


def agreement_line(b: dict) -> list[str]:
    """The compressed run's agreement with Full KV, from its baseline block."""
    a = b.get("answer_agreement")
    if not a or a.get("mean") is None:
        return []
    why = "".join(f", {a[key]} {text}" for key, text in (
        ("unanswered_by_one", "answered by one run only"),
        ("unanswered_by_both", "answered by neither")) if a.get(key))
    se = "" if a.get("stderr") is None else f" ± {100 * a['stderr']:.1f}%"
    inside = b.get("sample_answer_in_baseline")
    also = "n/a" if inside is None else f"{100 * inside:.1f}%"
    return [f"agreement with Full KV {100 * a['mean']:.1f}%{se} (majority answer, "
            f"{a['problems']} problems{why})   answers Full KV also gave {also}"]


def length_lines(s: dict) -> list[str]:
    """Accuracy per output-length bin: the bin's correct share and its sample count."""
    by_length = s.get("accuracy_by_length")
    if not by_length:
        return []
    if "error" in by_length:
        return [f"accuracy by output length n/a ({by_length['error']})"]
    bins = by_length["bins"]
    heads = [f"{b['lo']}-{b['hi'] - (i < len(bins) - 1)}" for i, b in enumerate(bins)]

    def cells(x: dict | None) -> list[str]:
        got = (x or {}).get("bins") or []
        if [(b["lo"], b["hi"]) for b in got] != [(b["lo"], b["hi"]) for b in bins]:
            return ["n/a"] * len(bins)  # a baseline without (these) bins
        return [("-" if b["accuracy"] is None else f"{b['accuracy']:.2f}") + f" ({b['samples']})"
                for b in got]
    return (["accuracy by output length in tokens (samples in the bin):"]
            + _table("", heads, [(label, cells(x.get("accuracy_by_length")))
                                 for label, x in _rows(s)]))


def equivalence_notes(s: dict) -> list[str]:
    """What limited the answer classes (comparisons timed out, a worker failed)."""
    out = []
    for label, stats in (("", s.get("answer_equivalence")),
                         (" with Full KV", (s.get("baseline") or {}).get("cross_equivalence"))):
        stats = stats or {}
        parts = []
        if stats.get("timeouts"):
            parts.append(f"{stats['timeouts']} math-verify call(s) timed out (counted unequal)")
        if stats.get("skipped"):
            parts.append(f"{stats['skipped']} comparison(s) skipped past a problem's time budget")
        if stats.get("failed_problems"):
            parts.append(f"{stats['failed_problems']} problem(s) compared by string and integer "
                         f"value only ({stats.get('first_failure')})")
        if parts:
            out.append(f"note: answer classes{label}: {'; '.join(parts)}")
    return out
