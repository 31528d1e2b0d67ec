"""The tasks' command lines refuse a misspelled option naming the closest known one."""
import pytest

from tasks import sweep, tables


@pytest.mark.parametrize("main, argv, says", [
    (sweep.main, ["task=amc23", "--dryrun"], "--dryrun (did you mean --dry-run?)"),
    (tables.main, ["results", "--nop-lots"], "--nop-lots (did you mean --no-plots?)"),
    (tables.main, ["results", "--zzz"], "unrecognized arguments: --zzz"),
])
def test_a_misspelled_option_exits_2_naming_the_closest_one(main, argv, says, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2 and says in capsys.readouterr().err
