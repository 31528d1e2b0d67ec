"""Zipage: an offline LLM engine with Compressed PagedAttention."""
from zipage.outputs import CompletionOutput, GenerateStats, RequestOutput
from zipage.sampling_params import SamplingParams

__all__ = ["LLM", "SamplingParams", "RequestOutput", "CompletionOutput", "GenerateStats"]


def __getattr__(name):
    # LLM is imported on first use: a tensor-parallel rank process imports zipage.distributed
    # and zipage.models without paying for the engine and transformers up front.
    if name == "LLM":
        from zipage.llm import LLM
        return LLM
    raise AttributeError(f"module 'zipage' has no attribute {name!r}")
