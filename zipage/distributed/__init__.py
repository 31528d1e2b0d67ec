"""Tensor parallelism: the process group (group.py) and one process per rank (launch.py)."""
from zipage.distributed.group import SINGLE, TPGroup, destroy_tp_group, init_tp_group, rank_device
from zipage.distributed.launch import RankError, RankProcesses, run_ranks

__all__ = ["SINGLE", "TPGroup", "RankError", "RankProcesses", "destroy_tp_group",
           "init_tp_group", "rank_device", "run_ranks"]
