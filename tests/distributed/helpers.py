"""Run ranks from a test and prove afterwards that none of their processes is left."""
import os

from zipage.distributed import RankProcesses


def assert_gone(pids: list[int]) -> None:
    """Neither running nor a zombie: a reaped process has no /proc entry."""
    assert pids, "no rank was started"
    left = [p for p in pids if os.path.exists(f"/proc/{p}")]
    assert not left, f"rank processes left behind: {left}"


def run_checked(fn, world_size: int, *args, timeout: float = 300, pids: list | None = None,
                device_type: str = "cpu"):
    """run_ranks(fn, world_size, *args), then check every rank process is gone, whether the
    run succeeded or raised. `pids` (a list) receives the ranks' process ids."""
    ranks = RankProcesses(world_size, device_type)
    try:
        with ranks:
            ranks.start(fn, *args)
            return ranks.wait(timeout)
    finally:
        assert_gone(ranks.pids)
        assert not os.path.exists(ranks.dir), "rendezvous directory left behind"
        if pids is not None:
            pids += ranks.pids
