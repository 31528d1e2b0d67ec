"""What a `model.path=` run is: its label and its reasoning switch, from the checkpoint
rather than from the default model preset (issue 29, item 5).

Without `model=<preset>`, a `model.path=` run composes the default preset (smollm2-135m);
its name, hub id and `thinking: false` describe SmolLM2, not the checkpoint. So, unless the
command line sets them (`model.name=`, `model.hub_id=`, `model.thinking=`, or a preset with
`model=`):
  * model.name becomes the checkpoint's label (tasks/checkpoint.py): the folder, the
    summary and the tables name what ran;
  * model.hub_id is cleared;
  * model.thinking is inferred from the checkpoint's chat template (<think> in it: a
    reasoning model, whose text before the last </think> is not scored); a checkpoint
    without a readable template keeps the configured value, with a warning.
Each decision is a note, printed and stored in run.json and summary.json.
"""
from __future__ import annotations

import os

from tasks.checkpoint import checkpoint_label, infer_thinking


def stated_keys(overrides) -> set[str]:
    """The config keys (or groups) a list of Hydra overrides sets."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    parsed = OverridesParser.create().parse_overrides(list(overrides or []))
    return {ov.key_or_group for ov in parsed}


def resolve_model(eff, stated) -> list[str]:
    """Settle `eff.model` for a model.path run (in place); returns the notes."""
    path = eff.model.path
    if path is None:
        return []
    stated = set(stated or ())
    preset = "model" in stated  # model=<preset>: its settings are the user's choice
    if "model.name" not in stated:
        eff.model.name = checkpoint_label(path)
    if "model.hub_id" not in stated and not preset:
        eff.model.hub_id = None
    if "model.thinking" in stated or preset:
        return []
    inferred = infer_thinking(path) if os.path.exists(path) else None
    if inferred is None:
        return [f"warning: model.path={path} has no readable chat template to tell whether it "
                f"is a reasoning model; model.thinking={str(eff.model.thinking).lower()} "
                f"assumed (set model.thinking=true if it writes <think>...</think>)"]
    eff.model.thinking = inferred
    why = "it has <think>" if inferred else "no <think> in it"
    return [f"model.thinking={str(inferred).lower()}, from the chat template of "
            f"model.path={path} ({why}); model.thinking=... overrides it"]
