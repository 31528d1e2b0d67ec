"""Compressed PagedAttention: token scoring and in-place KV compaction."""
from zipage.compression.batch import CompressionBatch
from zipage.compression.config import CompressionConfig
from zipage.compression.pipeline import (REFERENCE_OPS, TRITON_OPS, compress_batch,
                                         score_layers)

__all__ = ["CompressionBatch", "CompressionConfig", "compress_batch", "score_layers",
           "TRITON_OPS", "REFERENCE_OPS"]
