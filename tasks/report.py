"""The short human-readable summary printed at the end of a run."""
from __future__ import annotations

from tasks.report_answers import (agreement_line, equivalence_notes, label_width, length_lines,
                                  maj_lines, run_label)


def _f(x, fmt: str, unit: str = "") -> str:
    return "n/a" if x is None else format(x, fmt) + unit


def report(s: dict) -> str:
    b = s.get("baseline") or {}
    label, w = run_label(s), label_width(s)
    budget = f" budget={s['budget']}" if s.get("budget") is not None else ""
    lines = [
        f"{s['task']} | {s['model']} | {s['engine']}{budget} block={s['block_size']} | "
        f"n={s['n']} max_tokens={s['max_tokens']} T={s['temperature']} | device={s.get('device')}",
        f"problems {s['num_problems']}/{s['num_problems_expected']}, samples "
        f"{s['num_samples']}/{s['num_samples_expected']}"
        + ("" if s.get("complete") else "  (PARTIAL: rerun the same command to resume)"),
        f"{'':{w}} {'pass@1':>16} {'out tok/s':>10} {'gen time s':>11} {'mean len':>9} {'trunc':>6}",
        f"{label:{w}} {_f(s['pass@1'], '.4f'):>7} ± {_f(s['pass@1_stderr'], '.4f'):<6} "
        f"{_f(s['output_tokens_per_s'], '.1f'):>10} {_f(s['time_to_finish_s'], '.1f'):>11} "
        f"{_f(s['mean_output_tokens'], '.1f'):>9} {_f(s['truncation_rate'], '.0%'):>6}",
    ]
    if s.get("budget") is not None:
        lines.append(
            f"{'Full KV':{w}} {_f(b.get('pass@1'), '.4f'):>7} ± {_f(b.get('pass@1_stderr'), '.4f'):<6} "
            f"{_f(b.get('output_tokens_per_s'), '.1f'):>10} {_f(b.get('time_to_finish_s'), '.1f'):>11} "
            f"{_f(b.get('mean_output_tokens'), '.1f'):>9} {_f(b.get('truncation_rate'), '.0%'):>6}")
        if b.get("status"):
            lines.append(f"Full KV baseline: {b['status']}")
        retained = b.get("accuracy_retained")
        lines.append(f"accuracy retained {'n/a' if retained is None else f'{retained:.1f}%'}   "
                     f"speedup {_f(b.get('speedup'), '.2f', 'x')} (output tok/s)   "
                     f"time-to-finish speedup {_f(b.get('time_to_finish_speedup'), '.2f', 'x')}")
        lines += agreement_line(b)
        if b.get("throughput_source"):
            lines.append(f"Full KV throughput: {b['throughput_source']}")
        if b.get("conditions_differ"):
            lines.append(f"warning: measured under different conditions: "
                         f"{'; '.join(b['conditions_differ'])}")
    lines += maj_lines(s) + length_lines(s)
    extra = [f"pass@1 incl. truncated {_f(s.get('pass@1_incl_truncated'), '.4f')}",
             f"boxed {_f(s.get('boxed_rate'), '.0%')}",
             f"p95 len {_f(s.get('p95_output_tokens'), '.0f')}",
             f"compression share {_f(s.get('compression_time_share'), '.1%')}"]
    if s.get("num_scoring_timeouts"):
        extra.append(f"scoring timeouts {s['num_scoring_timeouts']}")
    lines.append("  ".join(extra))
    lines += problems(s) + equivalence_notes(s)
    for note in (s.get("cpu_clamps") or []) + (s.get("notes") or []):
        lines.append(note if note.startswith("warning") else f"note: {note}")
    lines.append(f"results: {s['run_dir']}")
    return "\n".join(lines)


def problems(s: dict) -> list[str]:
    """Warnings about what the numbers do not cover."""
    out = []
    if s.get("throughput_lower_bound"):
        reasons = s.get("throughput_lower_bound_reasons") or [
            "an interrupted segment's unfinished work was not reported by the engine"]
        out.append(f"note: out tok/s is a lower bound: {'; '.join(reasons)}")
    if s.get("untimed_samples"):
        out.append(f"note: {s['untimed_samples']} sample(s) ({s['untimed_output_tokens']} "
                   f"tokens) have no measured generation time (their process died before "
                   f"segments were recorded as they start): the throughput covers the other "
                   f"samples only, and no time-to-finish speedup is computed")
    if s.get("num_rejected_samples"):
        out.append(f"note: mean len and p95 len leave out the {s['num_rejected_samples']} "
                   f"rejected sample(s)")
    if s.get("data_sha256_at_generation"):
        out.append(f"note: scored against the data file as it is now (sha256 "
                   f"{(s.get('data_sha256') or 'none')[:12]}), not the one the samples were "
                   f"generated from ({s['data_sha256_at_generation'][:12]})")
    if s.get("rescored_because"):
        out.append(f"note: scored again: since the last scoring, "
                   f"{'; '.join(s['rescored_because'])} changed")
    errors = s.get("engine_errors") or []
    if errors:
        shown = "; ".join(f"{e['problem_id']} ({e['samples']} samples): {e['error']}"
                          for e in errors[:3])
        out.append(f"engine rejected {len(errors)} problem(s), counted wrong: {shown}"
                   + (" ..." if len(errors) > 3 else ""))
    f = s.get("samples_file") or {}
    bad = f.get("unreadable_lines") or []
    if bad:
        shown = "; ".join(f"line {b['line']}: {b['why']}" for b in bad[:5])
        out.append(f"warning: samples.jsonl has {len(bad)} unusable line(s), kept as they are "
                   f"and not scored: {shown}" + (" ..." if len(bad) > 5 else ""))
    out += sample_row_notes(f)
    ignored = f.get("ignored") or []
    if ignored:
        lines = ", ".join(str(r["line"]) for r in ignored[:5])
        out.append(f"warning: {len(ignored)} sample(s) name problems or sample indices outside "
                   f"this run's data (lines {lines}); kept, not scored")
    if f.get("incomplete_last_line"):
        out.append("note: the last line of samples.jsonl is incomplete (still being written, "
                   "or cut by a kill); not scored")
    return out


def sample_row_notes(f: dict) -> list[str]:
    """Rows not scored for want of this run's prompt hash, and samples with several rows."""
    out = []
    unmatched = f.get("unmatched") or []
    if unmatched:
        shown = "; ".join(f"line {u['line']} (problem {u['problem_id']} sample "
                          f"{u['sample_index']}): {u['why']}" for u in unmatched[:5])
        more = " ..." if len(unmatched) > 5 else ""
        out.append(f"warning: {len(unmatched)} row(s) of samples.jsonl without this run's "
                   f"prompt_hash, kept and not scored: {shown}{more}")
    for kind, text in (("conflict", "warning: {k} sample(s) have differing rows, none of them "
                                    "scored (delete the wrong line, then re-score): {shown}"),
                       ("identical", "note: {k} sample(s) have identical repeated rows, each "
                                     "scored once (its first line): {shown}")):
        dups = [d for d in f.get("duplicate_rows") or [] if d["kind"] == kind]
        if dups:
            shown = "; ".join(f"problem {d['problem_id']} sample {d['sample_index']} at lines "
                              f"{', '.join(map(str, d['lines']))}" for d in dups[:5])
            out.append(text.format(k=len(dups), shown=shown) + (" ..." if len(dups) > 5 else ""))
    return out
