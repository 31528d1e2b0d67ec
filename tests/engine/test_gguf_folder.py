"""A GGUF file is converted once into a cached folder; later loads read the folder."""
import os
import warnings

import pytest

from zipage.models import gguf_folder
from zipage.models.loader import resolve


def fake_convert(calls):
    def convert(file, folder):
        calls.append(file)
        with open(os.path.join(folder, "config.json"), "w") as f:
            f.write("{}")
    return convert


@pytest.fixture
def gguf_file(tmp_path, monkeypatch):
    monkeypatch.setenv("ZIPAGE_CACHE_DIR", str(tmp_path / "cache"))
    file = tmp_path / "tiny.gguf"
    file.write_bytes(b"GGUF" + bytes(16))
    return str(file)


def test_the_first_load_converts_and_later_ones_reuse_the_folder(gguf_file, monkeypatch):
    calls = []
    monkeypatch.setattr(gguf_folder, "convert", fake_convert(calls))
    folder = gguf_folder.gguf_as_folder(gguf_file)
    assert gguf_folder.gguf_as_folder(gguf_file) == folder
    assert calls == [gguf_file]
    assert resolve(gguf_file, "auto") == (folder, None)
    assert sorted(os.listdir(os.path.dirname(folder))) == [os.path.basename(folder)]


def test_a_replaced_file_is_converted_again(gguf_file, monkeypatch):
    calls = []
    monkeypatch.setattr(gguf_folder, "convert", fake_convert(calls))
    first = gguf_folder.gguf_as_folder(gguf_file)
    with open(gguf_file, "ab") as f:
        f.write(b"more")
    second = gguf_folder.gguf_as_folder(gguf_file)
    assert second != first and len(calls) == 2
    assert os.listdir(os.path.dirname(second)) == [os.path.basename(second)]  # first removed


def test_another_files_folder_is_kept(gguf_file, tmp_path, monkeypatch):
    monkeypatch.setattr(gguf_folder, "convert", fake_convert([]))
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF" + bytes(8))
    kept = gguf_folder.gguf_as_folder(str(other))
    mine = gguf_folder.gguf_as_folder(gguf_file)
    assert sorted(os.listdir(os.path.dirname(mine))) == sorted(
        [os.path.basename(kept), os.path.basename(mine)])


def test_a_crash_mid_conversion_leaves_nothing_a_later_load_would_trust(gguf_file, monkeypatch):
    def crash(file, folder):
        open(os.path.join(folder, "model.safetensors"), "w").close()
        raise KeyboardInterrupt
    monkeypatch.setattr(gguf_folder, "convert", crash)
    with pytest.raises(KeyboardInterrupt):
        gguf_folder.gguf_as_folder(gguf_file)
    assert os.listdir(os.path.join(os.environ["ZIPAGE_CACHE_DIR"], "gguf")) == []
    calls = []
    monkeypatch.setattr(gguf_folder, "convert", fake_convert(calls))
    gguf_folder.gguf_as_folder(gguf_file)
    assert calls == [gguf_file]


def test_an_unwritable_cache_falls_back_to_the_file_with_a_warning(gguf_file, tmp_path,
                                                                  monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("ZIPAGE_CACHE_DIR", str(blocker))
    monkeypatch.setattr(gguf_folder, "convert", fake_convert([]))
    with pytest.warns(UserWarning, match="cannot write the GGUF cache"):
        got = resolve(gguf_file, "auto")
    assert got == (os.path.dirname(gguf_file), "tiny.gguf")


def test_without_the_gguf_package_the_error_says_what_to_install(gguf_file, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "gguf", None)  # `import gguf` raises ImportError
    with pytest.raises(ImportError, match=r"tiny.gguf needs the `gguf` package: pip install gguf"):
        resolve(gguf_file, "auto")
    assert os.listdir(os.path.join(os.environ["ZIPAGE_CACHE_DIR"], "gguf")) == []


def test_a_missing_gguf_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="GGUF file not found: .*nope.gguf"):
        resolve(str(tmp_path / "nope.gguf"), "auto")


@pytest.mark.slow  # the real SmolLM2 folder (converted once per cache)
def test_smollm2_folder_keeps_the_gguf_tokenizer_and_chat_template(tmp_path, monkeypatch):
    from transformers import AutoTokenizer
    from zipage.models.presets import smollm2_gguf_path
    file = smollm2_gguf_path()
    folder, gguf = resolve("smollm2-135m", "auto")
    assert gguf is None and folder == gguf_folder.folder_for(file)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        direct = AutoTokenizer.from_pretrained(os.path.dirname(file),
                                               gguf_file=os.path.basename(file))
    cached = AutoTokenizer.from_pretrained(folder)
    messages = [{"role": "user", "content": "Natalia sold 48 clips. Héllo ∑ <think>x</think>"}]
    assert (cached.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            == direct.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))
    text = "def f(x):\n\treturn x**2  # 12,345 wörds <|im_end|>"
    assert cached(text).input_ids == direct(text).input_ids
    assert (len(cached), cached.eos_token_id, cached.bos_token_id) == \
        (len(direct), direct.eos_token_id, direct.bos_token_id)
    from tasks.identity import tokenizer_digest
    assert tokenizer_digest(cached) == tokenizer_digest(direct)  # older run folders resume
    from tasks.checkpoint import chat_template
    via_folder = chat_template(file)
    monkeypatch.setenv("ZIPAGE_CACHE_DIR", str(tmp_path))  # no folder there: the file is parsed
    assert chat_template(file) == via_folder and "<|im_start|>assistant" in via_folder
