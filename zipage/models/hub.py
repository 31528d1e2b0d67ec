"""A model named by its Hugging Face hub id: the local folder of its files, fetched into the
Hugging Face cache when missing there (the cache's copy serves offline)."""
import glob
import os

CONFIG_FILES = ["*.json", "*.jinja", "*.txt", "*.model", "tokenizer*"]
WEIGHT_FILES = ["*.safetensors"]


class ModelNotFoundError(FileNotFoundError):
    """The model's files are neither here nor fetchable; the message says what to do."""


def weight_files(folder: str) -> list[str]:
    """The checkpoint's weight files in `folder`, sorted (the shards' order)."""
    return sorted(f for p in WEIGHT_FILES for f in glob.glob(os.path.join(folder, p)))


def hub_snapshot(repo_id: str, weights: bool) -> str:
    """The cached snapshot folder of `repo_id`: config and tokenizer files, and the
    safetensors weights when `weights` (random-weight runs need only the config)."""
    from huggingface_hub import snapshot_download
    patterns = CONFIG_FILES + (WEIGHT_FILES if weights else [])
    try:
        folder = snapshot_download(repo_id, allow_patterns=patterns)
    except Exception as e:  # offline, no such repo, gated without a token, a full disk
        lines = str(e).strip().splitlines()
        raise ModelNotFoundError(
            f"model {repo_id!r} could not be fetched from the Hugging Face hub and is not in "
            f"its local cache ({type(e).__name__}: {lines[0] if lines else 'no detail'}). "
            f"Fetch it where the hub is reachable (`hf download {repo_id}`; HF_HUB_OFFLINE=1 "
            f"then uses that copy without asking the hub), or pass a local checkpoint folder "
            f"instead") from e
    # Offline, the hub returns a cached snapshot as it is: one a random-weight run fetched
    # holds the config alone.
    if weights and not weight_files(folder):
        raise ModelNotFoundError(
            f"model {repo_id!r} is in the local Hugging Face cache without its weights "
            f"({folder} holds no *.safetensors; a random-weight run fetches the config alone). "
            f"Fetch them where the hub is reachable (`hf download {repo_id}`), or pass a local "
            f"checkpoint folder instead")
    return folder
