"""What a run says before it starts about settings that do less than they seem: `budget=`
given to Full KV (named as not applying, not dropped without a word), n > 1 samples at
temperature 0 (all the same path)."""
from harness_fixtures import config, runner

NOTE = "budget=1024 does not apply to engine=fullkv"


def test_fullkv_run_given_a_budget_says_it_does_not_apply(tmp_path, data_dir, engine, capsys):
    cfg = config(tmp_path, data_dir, "engine=fullkv", "budget=1024")
    runner.evaluate(cfg, str(tmp_path / "run"), stated={"engine", "budget"})
    assert NOTE in capsys.readouterr().out


def test_fullkv_run_without_a_budget_and_budget_runs_print_no_such_note(tmp_path, data_dir,
                                                                         engine, capsys):
    runner.evaluate(config(tmp_path, data_dir, "engine=fullkv"), str(tmp_path / "a"),
                    stated={"engine"})  # the default budget (2048) was not asked for
    runner.evaluate(config(tmp_path, data_dir, "budget=1024", "engine.block_size=16"),
                    str(tmp_path / "b"), stated={"budget", "engine.block_size"})
    assert "does not apply" not in capsys.readouterr().out


def test_greedy_sampling_with_several_samples_says_they_are_one_path(tmp_path, data_dir,
                                                                      engine, capsys):
    runner.evaluate(config(tmp_path, data_dir, "sampling=greedy", "sampling.n=3", "budget=512"),
                    str(tmp_path / "a"))
    assert ("note: sampling.n=3 at temperature 0 (greedy): a problem's 3 samples take the same "
            "path") in capsys.readouterr().out
    runner.evaluate(config(tmp_path, data_dir, "sampling=greedy", "sampling.n=1", "budget=512"),
                    str(tmp_path / "b"))
    runner.evaluate(config(tmp_path, data_dir, "sampling.n=3", "budget=512"), str(tmp_path / "c"))
    assert "at temperature 0" not in capsys.readouterr().out
