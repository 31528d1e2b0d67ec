"""The pinned staging of CUDA-graph decode steps (zipage/worker/staging.py) on a simulated
stream: a queued host-to-device copy reads its buffer only when the device reaches it, so
steps launched back to back without collecting (the calibration's timed repetitions) must
each deliver their own inputs, however many are queued."""
import torch

from zipage.worker.staging import StagingRing


class Stream:
    """Queued copies run in order, when an event recorded behind them is waited for."""

    def __init__(self):
        self.queue, self.done = [], 0

    def run_until(self, mark: int) -> None:
        while self.done < mark:
            self.queue[self.done]()
            self.done += 1


class Event:
    def __init__(self, stream: Stream):
        self.stream, self.mark = stream, 0

    def record(self, stream=None):
        self.mark = len(self.stream.queue)

    def synchronize(self):
        self.stream.run_until(self.mark)


def test_back_to_back_steps_each_copy_their_own_inputs():
    stream, delivered = Stream(), []
    ring = StagingRing(lambda: (torch.zeros(3, dtype=torch.int32),), depth=2,
                       event=lambda: Event(stream))
    for step in range(5):  # none collected: the device has not started any copy
        (host,) = ring.take()
        host.fill_(-1)  # like pad_tables: padding first, then the rows
        host[:] = torch.tensor([step, 10 + step, 20 + step])
        stream.queue.append(lambda h=host: delivered.append(h.tolist()))  # the queued copy
        ring.queued()
    stream.run_until(len(stream.queue))
    assert delivered == [[s, 10 + s, 20 + s] for s in range(5)]


def test_the_step_in_flight_is_not_waited_for():
    """The asynchronous engine: step N-1 in flight while step N+1 is prepared; N is done."""
    stream = Stream()
    ring = StagingRing(lambda: (torch.zeros(1),), depth=2, event=lambda: Event(stream))
    for _ in range(2):
        ring.take()
        stream.queue.append(lambda: None)
        ring.queued()
    stream.run_until(1)  # the first step was collected, the second is in flight
    ring.take()
    assert stream.done == 1  # the step in flight was not forced to finish
