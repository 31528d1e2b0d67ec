"""The argument parser of the project's command lines: a misspelled option is refused naming
the closest known one (argparse alone says only "unrecognized arguments")."""
import argparse
import difflib


def with_closest(words: list[str], known: list[str]) -> str:
    """`words` joined, each unknown option followed by the closest of `known`, if any."""
    # Names compare without their dashes, which would otherwise match any two long options
    # (--bogus looked like --out).
    by_name = {option.lstrip("-"): option for option in known}
    out = []
    for word in words:
        close = (difflib.get_close_matches(word.split("=")[0].lstrip("-"), list(by_name), n=1)
                 if word.startswith("-") else [])
        out.append(f"{word} (did you mean {by_name[close[0]]}?)" if close else word)
    return " ".join(out)


def known_options(parser: argparse.ArgumentParser) -> list[str]:
    return [o for action in parser._actions for o in action.option_strings]


class Parser(argparse.ArgumentParser):
    def parse_args(self, args=None, namespace=None):
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            self.error(f"unrecognized arguments: {with_closest(unknown, known_options(self))}")
        return parsed
