"""What `model.path` points at, read without loading a model: whether it is a checkpoint
the engine can load, the label a run of it is filed under, and whether its chat template
makes it a reasoning model (issue 29, items 5 and 6)."""
from __future__ import annotations

import json
import os
import re

THINK_TAGS = ("<think>", "</think>")


def checkpoint_error(path: str) -> str | None:
    """Why `path` is not a checkpoint the engine loads (a folder with config.json, or a
    .gguf file), or None."""
    if not os.path.exists(path):
        return f"model.path={path} does not exist"
    if os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, "config.json")):
            return (f"model.path={path} is a folder without config.json: not a Hugging Face "
                    f"checkpoint (pass the folder that holds config.json, or a .gguf file)")
        return None
    with open(path, "rb") as f:
        magic = f.read(4)
    if not path.endswith(".gguf") or magic != b"GGUF":
        return (f"model.path={path} is not a model: pass a checkpoint folder (with "
                f"config.json) or a GGUF file (.gguf)")
    return None


def checkpoint_label(path: str) -> str:
    """The name a run of `path` is filed and labelled under: the checkpoint folder's name
    (or the GGUF file's, without .gguf), with characters other than letters, digits, `.`,
    `_` and `-` replaced by `-`."""
    name = os.path.basename(os.path.normpath(os.path.abspath(path)))
    name = name[:-5] if name.endswith(".gguf") else name
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "model"


def chat_template(path: str) -> str | None:
    """The checkpoint's chat template text (all named templates joined), or None."""
    if os.path.isdir(path):
        for name in ("chat_template.jinja", "chat_template.json", "tokenizer_config.json"):
            file = os.path.join(path, name)
            if not os.path.isfile(file):
                continue
            if name.endswith(".jinja"):
                with open(file, encoding="utf-8") as f:
                    return f.read()
            with open(file, encoding="utf-8") as f:
                template = json.load(f).get("chat_template")
            if isinstance(template, list):  # [{"name": ..., "template": ...}]
                template = "\n".join(str(t.get("template", "")) for t in template)
            if template:
                return str(template)
        return None
    from zipage.models.gguf_folder import folder_for
    converted = folder_for(path)
    if os.path.isdir(converted):  # converted already: no parse of the whole file
        return chat_template(converted)
    try:
        from gguf import GGUFReader
        field = GGUFReader(path).fields.get("tokenizer.chat_template")
    except Exception:  # noqa: BLE001 - an unreadable header: the engine reports it later
        return None
    return None if field is None else bytes(field.parts[field.data[0]]).decode("utf-8", "replace")


def infer_thinking(path: str) -> bool | None:
    """True if the chat template speaks of <think> (a reasoning model), False if it does
    not, None if the checkpoint has no readable template."""
    template = chat_template(path)
    return None if template is None else any(tag in template for tag in THINK_TAGS)
