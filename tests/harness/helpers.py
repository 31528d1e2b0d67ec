"""Module-level helpers: spawned pool workers must be able to import them."""
import time


def maybe_hang(x):
    if x == "hang":
        time.sleep(120)  # uninterruptible from outside but by killing the process
    if x == "raise":
        raise ValueError("bad item")
    return x * 2
