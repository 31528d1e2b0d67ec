"""argparse types for the benchmark options that take a number: each rejects, with the
reason, what would otherwise time nothing, divide by zero or loop forever."""
import argparse
import math


def finite_number(text: str) -> float:
    """A float that is neither inf nor nan ('inf' seconds loops forever; nan compares false)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"a finite number; got {text}")
    return value


def seconds_or_zero(text: str) -> float:
    """Seconds, 0 meaning none (a negative loop would measure nothing)."""
    value = finite_number(text)
    if value < 0.0:
        raise argparse.ArgumentTypeError(f"seconds, 0 or more; got {text}")
    return value


def positive_seconds(text: str) -> float:
    """Seconds, more than 0 (a loop of no time has no mean)."""
    value = finite_number(text)
    if value <= 0.0:
        raise argparse.ArgumentTypeError(f"seconds, more than 0; got {text}")
    return value


def fraction_below_one(text: str) -> float:
    """A fraction in [0, 1), e.g. 0.02 for 2%."""
    value = finite_number(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"a fraction in [0, 1), e.g. 0.02 for 2%; got {text}")
    return value


def positive_int(text: str) -> int:
    """A count or a size: 1 or more (0 requests, a block of -16 tokens, ...)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"1 or more; got {text}")
    return value


def count_or_zero(text: str) -> int:
    """A count where 0 has a meaning of its own (the option's help says which)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"0 or more; got {text}")
    return value


def positive_number(text: str) -> float:
    """A finite number over 0: a memory size in GiB, a mean length, a sigma."""
    value = finite_number(text)
    if value <= 0.0:
        raise argparse.ArgumentTypeError(f"more than 0; got {text}")
    return value


def temperature(text: str) -> float:
    """A sampling temperature: finite, 0 or more (0 = greedy)."""
    value = finite_number(text)
    if value < 0.0:
        raise argparse.ArgumentTypeError(f"0 or more (0 = greedy); got {text}")
    return value


def memory_fraction(text: str) -> float:
    """A share of the GPU's memory, in (0, 1]."""
    value = finite_number(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"a fraction in (0, 1], e.g. 0.9; got {text}")
    return value
