"""argparse types for the benchmark options that take a number: each rejects, with the
reason, what would otherwise time nothing, divide by zero, loop forever or fail deep inside."""
import argparse
import math


def real_number(text: str) -> float:
    """A float, inf allowed (a time limit of inf means none); nan fails every bound below."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def finite_number(text: str) -> float:
    """A float that is neither inf nor nan ('inf' seconds loops forever; nan compares false)."""
    value = real_number(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"a finite number; got {text}")
    return value


def whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def bounded(parse, accepts, expected: str, doc: str):
    """A type that parses with `parse` and refuses values `accepts` rejects, saying `expected`."""
    def check(text: str):
        value = parse(text)
        if not accepts(value):
            raise argparse.ArgumentTypeError(f"{expected}; got {text}")
        return value
    check.__doc__ = doc
    return check


seconds_or_zero = bounded(finite_number, lambda v: v >= 0, "seconds, 0 or more",
                          "Seconds, 0 meaning none (a negative loop would measure nothing).")
positive_seconds = bounded(finite_number, lambda v: v > 0, "seconds, more than 0",
                           "Seconds, more than 0 (a loop of no time has no mean).")
fraction_below_one = bounded(finite_number, lambda v: 0 <= v < 1,
                             "a fraction in [0, 1), e.g. 0.02 for 2%", "A fraction in [0, 1).")
time_limit = bounded(real_number, lambda v: v > 0, "seconds, more than 0 (inf: no limit)",
                     "A wall-clock limit: more than 0 seconds, or inf for none.")
open_fraction = bounded(finite_number, lambda v: 0 < v < 1, "a fraction in (0, 1), e.g. 0.33",
                        "A share of a set split in two: each side must keep something.")
positive_int = bounded(whole_number, lambda v: v >= 1, "1 or more",
                       "A count or a size: 1 or more (0 requests, a block of -16 tokens, ...).")
count_or_zero = bounded(whole_number, lambda v: v >= 0, "0 or more",
                        "A count where 0 has a meaning of its own (the option's help says which).")
positive_number = bounded(finite_number, lambda v: v > 0, "more than 0",
                          "A finite number over 0: a memory size in GiB, a mean length, a sigma.")
temperature = bounded(finite_number, lambda v: v >= 0, "0 or more (0 = greedy)",
                      "A sampling temperature: finite, 0 or more (0 = greedy).")
memory_fraction = bounded(finite_number, lambda v: 0 < v <= 1, "a fraction in (0, 1], e.g. 0.9",
                          "A share of the GPU's memory, in (0, 1].")


def output_stem(text: str) -> str:
    """An output path without extension, <stem>.json (or .json.gz) and <stem>.md being
    written: a trailing extension is dropped (`--out x.json` wrote x.json.json, x.json.md)."""
    for ext in (".json.gz", ".json", ".md"):
        if text.endswith(ext) and len(text) > len(ext):
            return text[:-len(ext)]
    return text
