"""The tasks' command lines refuse a misspelled option naming the closest known one."""
import pytest

from tasks import score, sweep, tables


@pytest.mark.parametrize("main, argv, says", [
    (sweep.main, ["task=amc23", "--dryrun"], "--dryrun (did you mean --dry-run?)"),
    (tables.main, ["results", "--nop-lots"], "--nop-lots (did you mean --no-plots?)"),
    (tables.main, ["results", "--zzz"], "unrecognized arguments: --zzz"),
    (score.main, ["run", "--timout", "5"], "--timout (did you mean --timeout?)"),
    (tables.main, ["results", "--bogus"], "unrecognized arguments: --bogus\n"),  # not --out
])
def test_a_misspelled_option_exits_2_naming_the_closest_one(main, argv, says, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2 and says in capsys.readouterr().err


@pytest.mark.parametrize("main, prog", [(score.main, "python -m tasks.score"),
                                        (sweep.main, "python -m tasks.sweep"),
                                        (tables.main, "python -m tasks.tables")])
def test_usage_names_the_command_a_user_types(main, prog, capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert capsys.readouterr().out.startswith(f"usage: {prog} ")
