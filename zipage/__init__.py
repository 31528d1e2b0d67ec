"""Zipage: an offline LLM engine with Compressed PagedAttention."""
from zipage.llm import LLM
from zipage.outputs import CompletionOutput, GenerateStats, RequestOutput
from zipage.sampling_params import SamplingParams

__all__ = ["LLM", "SamplingParams", "RequestOutput", "CompletionOutput", "GenerateStats"]
