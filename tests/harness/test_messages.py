"""Messages point at the fix a user can type (issue 29, item 10), and the report's small
print says what it means (item 11)."""
import os
import subprocess
import sys

import pytest

from harness_fixtures import DATA_DIR, ROOT

CPU_CLAMP = "cpu.block_size clamps engine.block_size 256 -> 16"
CASES = [
    (["budget=16", "engine=zipage_attn_recent"],  # 4 sinks, as the default had
     "engine: observation_window 16 + num_sink_tokens 4 exceed the budget 16: raise the budget "
     "or set engine.compression.num_sink_tokens=0 (CPU run: engine.block_size 256 -> 16"),
    (["budget=100"], f"budget=100 must be a positive multiple of engine.block_size=16 (this "
                     f"CPU run's: {CPU_CLAMP}; cpu.enabled=false keeps 256)"),
    (["task=gsm8"], "unknown task 'gsm8' (did you mean 'gsm8k'?); available: aime24, aime25, "
                    "amc23, gsm8k, livecodebench, math500"),
    (["task.name=gsm8"], "unknown task 'gsm8' (did you mean 'gsm8k'?); registered: aime24, "
                         "aime25, amc23, gsm8k, livecodebench, math500"),
    (["seed=abc"], "seed=abc is not an integer"),
    (["budget=1e3"], "budget=1e3 is not an integer or null (1e3 reads as 1000.0)"),
    (["engine=zipag"], "unknown engine 'zipag' (did you mean 'zipage'?)"),
    (["sampling.top_p=0"], "sampling.top_p=0.0 is out of range: in (0, 1]"),
    (["task.limit=0"], "task.limit=0 is out of range: 1 or more (null: every problem)"),
    (["scoring.workers=-1"], "scoring.workers=-1 is out of range: 0 or more (0: one per CPU core)"),
    (["cpu.limit=0"], "cpu.limit=0 is out of range: 1 or more (a CPU run's clamp)"),  # ran 0
    # Hydra said "use +task.options.instructions=x", and the + form named the typo later
    (["task.options.instructions=x"], "unknown option task.options.instructions for task amc23 "
                                      "(did you mean 'instruction'?)"),
    (["engine.compression.redundancy_wieght=0.5"], "unknown compression option "
     "engine.compression.redundancy_wieght (did you mean 'redundancy_weight'?)"),
    (["cpu.max_tokens=-5"], "cpu.max_tokens=-5 is out of range: 1 or more (a CPU run's clamp)"),
    (["cpu.block_size=24"],
     "cpu.block_size=24 is out of range: a power of two, 16 or more (a CPU run's clamp)"),
]


@pytest.mark.parametrize("overrides,message", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_issue29_messages_name_what_to_type(tmp_path, overrides, message):
    """Item 10: one line, exit 2, no folder; the CPU block size and clamp that apply, the
    Hydra key for the sinks, only real presets (no base_task), every registered task."""
    p = subprocess.run([sys.executable, "run.py", *overrides, "engine.device=cpu",
                        f"data_dir={DATA_DIR}", f"results_dir={tmp_path}/results"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith("error: ") and message in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "base_task" not in p.stderr
    assert not os.path.exists(tmp_path / "results")


def base_summary(**over):
    s = {"task": "amc23", "model": "m", "engine": "zipage", "budget": 128, "block_size": 16,
         "n": 1, "max_tokens": 64, "temperature": 0.6, "device": "cpu", "num_problems": 1,
         "num_problems_expected": 1, "num_samples": 1, "num_samples_expected": 1,
         "complete": True, "pass@1": 0.0, "pass@1_stderr": 0.0, "output_tokens_per_s": 0.42,
         "time_to_finish_s": 10.0, "mean_output_tokens": 64.0, "truncation_rate": 1.0,
         "run_dir": "/r", "baseline": {"status": "not computed"}}
    return {**s, **over}


def test_issue29_report_small_print():
    """Item 11: no "n/ax"; mean len leaves rejected samples out and says so; a task
    without boxed answers shows "boxed n/a"; tables show a CPU run's tok/s with decimals."""
    from tasks.report import report
    from tasks.summary import summarize
    from tasks.tables_format import throughput_cell
    text = report(base_summary())
    assert "speedup n/a (output tok/s)" in text and "time-to-finish speedup n/a" in text
    assert "n/ax" not in text
    rows = [{"problem_id": "a", "sample_index": 0, "correct": False, "finish_reason": "stop",
             "completion_tokens": 30},
            {"problem_id": "a", "sample_index": 1, "correct": False, "finish_reason": "error",
             "completion_tokens": 0, "error": "prompt too long"}]
    s = summarize(rows, 1, 2, [])
    assert s["mean_output_tokens"] == 30 and s["num_rejected_samples"] == 1
    assert s["boxed_rate"] is None  # no verdict says (a code task)
    text = report(base_summary(**s))
    assert "boxed n/a" in text and "leave out the 1 rejected sample(s)" in text
    assert throughput_cell({"output_tokens_per_s": 0.4249, "complete": True}) == "0.42"
    assert throughput_cell({"output_tokens_per_s": 12.34, "complete": True}) == "12.3"
    assert throughput_cell({"output_tokens_per_s": 1234.5, "complete": True}) == "1234"


def test_a_data_file_without_data_dir_is_read_from_the_current_directory(tmp_path):
    """`task.data_file=` alone asked for data_dir= (or a hub revision) and never read it."""
    (tmp_path / "mine.jsonl").write_text('{"id": "a", "question": "1+1?", "answer": "2"}\n'
                                         '{"id": "b", "question": "x", "answer": null}\n')
    env = {k: v for k, v in os.environ.items() if k != "ZIPAGE_DATA_DIR"}
    p = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), "task=gsm8k",
                        "task.data_file=mine.jsonl", "engine.device=cpu",
                        f"results_dir={tmp_path}/results"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr == (
        f"error: {tmp_path}/mine.jsonl:2: field answer must be a string or a number, got null\n")


def test_a_task_option_is_checked_against_every_task_of_a_sweep():
    from tasks.overrides import check_overrides
    assert check_overrides(["task=livecodebench", "+task.options.release=release_v5"]) is None
    assert check_overrides(["task=livecodebench,amc23", "+task.options.release=release_v5"]) \
        .startswith("unknown option task.options.release for task amc23")
    assert check_overrides(["+task.options.thinking=true"]) is None  # the default task, amc23
    assert check_overrides(["task.name=livecodebench", "+task.options.release=release_v5"]) is None
    assert check_overrides(["engine=snapkv", "engine.compression.pooling_mode=max"]) is None
    assert check_overrides(["+engine.extra.enable_prefix_caching=false"]) is None
    assert check_overrides(["+engine.extra.enable_prefix_cache=false"]).startswith(
        "unknown engine option engine.extra.enable_prefix_cache (did you mean "
        "'enable_prefix_caching'?)")


def test_a_missing_data_file_names_what_its_folder_holds(tmp_path):
    from tasks.base import DataError
    from tasks.data_files import read_jsonl
    (tmp_path / "amc23.jsonl").write_text("")
    with pytest.raises(DataError) as err:
        read_jsonl(str(tmp_path / "gsm8k.jsonl"), ("question", "answer"))
    assert str(err.value) == (f"data file not found: {tmp_path}/gsm8k.jsonl ({tmp_path} holds "
                              f"amc23.jsonl); without data_dir and task.data_file the run reads "
                              f"the Hugging Face copy")
    with pytest.raises(DataError, match=r"\(no such folder\)"):
        read_jsonl(str(tmp_path / "nope" / "gsm8k.jsonl"), ("question", "answer"))
