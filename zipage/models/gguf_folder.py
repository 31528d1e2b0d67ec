"""A GGUF file converted once into a Hugging Face folder (config, tokenizer, float32
safetensors) in a cache, so that later loads, and every tensor-parallel rank, skip the GGUF
parse: transformers reads the file four times per load (config twice, tokenizer, weights),
about 26 s for SmolLM2-135M on a CPU, where the folder loads in about 1 s."""
import hashlib
import json
import os
import shutil
import tempfile
import warnings

FORMAT = 1  # bump when the folder's layout or the conversion changes


def cache_root() -> str:
    """ZIPAGE_CACHE_DIR, else $XDG_CACHE_HOME/zipage, else ~/.cache/zipage."""
    if os.environ.get("ZIPAGE_CACHE_DIR"):
        return os.environ["ZIPAGE_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "zipage")


def folder_for(file: str) -> str:
    """The cache folder of this GGUF file as it is now: a new size or modification time (a
    replaced file) gives a new folder."""
    st = os.stat(file)
    key = f"{os.path.realpath(file)}|{st.st_size}|{st.st_mtime_ns}|{FORMAT}"
    stem = os.path.basename(file)[:-len(".gguf")] if file.endswith(".gguf") else os.path.basename(file)
    return os.path.join(cache_root(), "gguf", f"{stem}-{hashlib.sha1(key.encode()).hexdigest()[:12]}")


def convert(file: str, folder: str) -> None:
    """Write config.json, the tokenizer files and model.safetensors (float32, the dequantized
    values exactly) of the GGUF `file` into `folder`."""
    try:
        import gguf  # noqa: F401  (transformers reads GGUF with it)
    except ImportError:
        raise ImportError(f"reading {file} needs the `gguf` package: pip install gguf") from None
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    path, name = os.path.dirname(os.path.abspath(file)), os.path.basename(file)
    config = AutoConfig.from_pretrained(path, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(path, gguf_file=name, config=config,
                                                 dtype=torch.float32)
    tensors = {k: v.contiguous() for k, v in model.state_dict().items()
               if not (config.tie_word_embeddings and k == "lm_head.weight")}
    save_file(tensors, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(folder)
    AutoTokenizer.from_pretrained(path, gguf_file=name).save_pretrained(folder)


def gguf_as_folder(file: str) -> str | None:
    """The converted folder of `file`, converting it on first use; None (with a warning) where
    the cache cannot be written, so the caller reads the GGUF file itself."""
    folder = folder_for(file)
    if os.path.isfile(os.path.join(folder, "config.json")):
        return folder
    parent = os.path.dirname(folder)
    try:
        os.makedirs(parent, exist_ok=True)
        work = tempfile.mkdtemp(prefix=".converting-", dir=parent)
    except OSError as e:
        return _unwritable(parent, file, e)
    print(f"converting {os.path.basename(file)} once into {folder} (float32; later loads "
          f"read the folder)", flush=True)
    try:
        convert(file, work)
        with open(os.path.join(work, "source.json"), "w") as f:
            json.dump({"gguf": os.path.realpath(file), "format": FORMAT}, f)
        try:
            os.rename(work, folder)  # whole or absent: a crash leaves only the .converting- folder
        except OSError:
            if not os.path.isfile(os.path.join(folder, "config.json")):
                raise
            # another process finished the same conversion first; its folder is as good
    except OSError as e:
        return _unwritable(parent, file, e)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    remove_older_conversions(file, folder)
    return folder


def _unwritable(parent: str, file: str, error: OSError) -> None:
    warnings.warn(f"cannot write the GGUF cache {parent} ({error}): reading {file} directly, "
                  f"slowly, on every load (set ZIPAGE_CACHE_DIR to a writable folder)")


def remove_older_conversions(file: str, keep: str) -> None:
    """Folders converted from an earlier version of the same path (a reinstalled package, a
    replaced file): never read again, 0.5 GB each for SmolLM2."""
    parent, real = os.path.dirname(keep), os.path.realpath(file)
    for name in os.listdir(parent):
        other = os.path.join(parent, name)
        if other == keep or name.startswith("."):
            continue
        try:
            with open(os.path.join(other, "source.json")) as f:
                same_file = json.load(f).get("gguf") == real
        except (OSError, ValueError):
            continue
        if same_file:
            shutil.rmtree(other, ignore_errors=True)
