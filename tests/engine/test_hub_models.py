"""A model named by its Hugging Face hub id loads from the local hub cache, and one that is
neither cached nor reachable fails with what to do. Each case runs in a subprocess with
HF_HUB_OFFLINE=1 and HF_HUB_CACHE pointing at a cache built here: the hub's settings are
read when huggingface_hub is imported."""
import os
import shutil
import subprocess
import sys

from tests.engine.tiny_models import tiny_checkpoint

REPO = "tiny-org/tiny-llama"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def hub_cache(tmp_path, files_from: str | None) -> str:
    """A Hugging Face cache holding REPO at COMMIT (the files of `files_from`), or empty."""
    cache = tmp_path / "hub"
    cache.mkdir()
    if files_from:
        repo = cache / ("models--" + REPO.replace("/", "--"))
        (repo / "refs").mkdir(parents=True)
        (repo / "refs" / "main").write_text(COMMIT)
        shutil.copytree(files_from, repo / "snapshots" / COMMIT)
    return str(cache)


def run_offline(cache: str, code: str, cwd: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": cache,
           "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=300)


GENERATE = f"""
from zipage import LLM, SamplingParams
llm = LLM({REPO!r}, device="cpu", block_size=16, kv_cache_tokens=512, max_model_len=128)
out = llm.generate([[1, 2, 3, 4]], SamplingParams(temperature=0, max_tokens=5), use_tqdm=False)
print("TOKENS", len(out[0].outputs[0].token_ids))
"""

LOAD_ERROR = f"""
from zipage import LLM
from zipage.models.hub import ModelNotFoundError
try:
    LLM({REPO!r}, device="cpu")
except ModelNotFoundError as e:
    print("ERROR", e)
"""


def test_a_hub_id_in_the_local_cache_loads_its_weights_from_there(tmp_path):
    folder, _ = tiny_checkpoint("llama")
    done = run_offline(hub_cache(tmp_path, folder), GENERATE, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "TOKENS 5" in done.stdout


def test_a_hub_id_neither_cached_nor_reachable_says_how_to_fetch_it(tmp_path):
    done = run_offline(hub_cache(tmp_path, None), LOAD_ERROR, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    message = done.stdout.split("ERROR", 1)[-1]
    assert REPO in message and f"hf download {REPO}" in message
    assert "HF_HUB_OFFLINE" in message and "checkpoint folder" in message


def test_a_hub_id_cached_without_its_weights_says_how_to_fetch_them(tmp_path):
    folder, _ = tiny_checkpoint("llama")
    config_only = tmp_path / "config_only"
    shutil.copytree(folder, config_only, ignore=shutil.ignore_patterns("*.safetensors"))
    done = run_offline(hub_cache(tmp_path, str(config_only)), LOAD_ERROR, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    message = done.stdout.split("ERROR", 1)[-1]
    assert "without its weights" in message and f"hf download {REPO}" in message
