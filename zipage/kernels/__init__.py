"""Attention kernels: Triton kernel + wrapper + PyTorch reference per file."""
from zipage.kernels._dispatch import use_triton
from zipage.kernels.paged_decode import paged_decode_attention, paged_decode_attention_reference
from zipage.kernels.paged_prefill import paged_prefill_attention, paged_prefill_attention_reference
from zipage.kernels.store_kv import store_kv, store_kv_reference, store_rows, store_rows_reference

__all__ = [
    "use_triton",
    "store_kv", "store_kv_reference", "store_rows", "store_rows_reference",
    "paged_decode_attention", "paged_decode_attention_reference",
    "paged_prefill_attention", "paged_prefill_attention_reference",
]
