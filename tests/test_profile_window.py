"""bench profile --decode-only: the profiler window opens once every row of a collected step
is a single token (all prefills done) and closes `steps` steps later."""
from types import SimpleNamespace

from scripts.throughput.profile_step import DecodeWindow


def step(*tokens):
    return SimpleNamespace(requests={i: SimpleNamespace(num_tokens=n)
                                     for i, n in enumerate(tokens)})


def test_window_opens_after_the_last_prefill_and_closes_after_its_steps():
    calls = []
    window = DecodeWindow(3, lambda: calls.append("start"), lambda: calls.append("stop"))
    for s in (step(128, 128), step(1, 64), step(1, 1), step(1, 1), step(1, 1), step(1, 1),
              step(1, 1), step(1, 1)):
        window(s, None, None)
        calls.append(".")
    # two steps with a prefill row, then start; three more, then stop; nothing after
    assert calls == [".", ".", "start", ".", ".", ".", "stop", ".", ".", "."]
    assert window.wall_s is not None and window.counted == 3


def test_window_never_opens_without_a_decode_only_step():
    calls = []
    window = DecodeWindow(2, lambda: calls.append("start"), lambda: calls.append("stop"))
    for s in (step(), step(16), step(1, 16)):  # an empty step does not count as decode-only
        window(s, None, None)
    assert calls == [] and window.wall_s is None
