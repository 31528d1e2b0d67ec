"""Pinned host buffers for a step's host-to-device copies, used in turn.

A copy from pinned memory is queued, not done: the device reads the buffer when the copy
reaches it in the stream, possibly after later steps were prepared on the host. A set is
therefore rewritten only after an event recorded behind its last copies has passed. The
asynchronous engine has at most one step in flight when it prepares the next, so two sets
never wait there; the calibration launches three steps back to back, and without the wait
its third step rewrote the first step's queued tables (-1 padding mid-write: the likely
cause of the H200 illegal memory access of docs/status.md item 1).
"""
from typing import Callable

import torch


class StagingRing:
    def __init__(self, make: Callable[[], tuple], depth: int = 2, event=None):
        """make() builds one set of host tensors; event() a CUDA-event-like object
        (record(), synchronize()); an unrecorded one returns at once."""
        event = event or torch.cuda.Event
        self.sets = [make() for _ in range(depth)]
        self.events = [event() for _ in range(depth)]
        self.turn = 0

    def take(self) -> tuple:
        """The next set, once the copies that last read it have run (at once, usually)."""
        i = self.turn % len(self.sets)
        self.events[i].synchronize()
        return self.sets[i]

    def queued(self, stream=None) -> None:
        """The copies from the set take() returned are queued on `stream` (default: the
        current one)."""
        self.events[self.turn % len(self.sets)].record(stream)
        self.turn += 1
