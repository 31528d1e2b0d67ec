"""Decode roofline estimate of `throughput`: device copy bandwidth, bytes a decode step reads
(weights + KV), and the achieved fraction of the copy bandwidth."""
import statistics
import time

import torch

from scripts.common import free_memory


def gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:.3g} GB" if nbytes >= 1e8 else f"{nbytes / 1e6:.3g} MB"


def copy_bandwidth(device: torch.device, nbytes: int = 2**30, reps: int = 20) -> float:
    """Device-to-device copy bandwidth in bytes/s (bytes read + bytes written), median."""
    src = torch.randn(nbytes // 4, device=device)  # random data, never zeros
    dst = torch.empty_like(src)
    times = []
    for i in range(reps + 3):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            t = start.elapsed_time(end) / 1e3
        else:
            t0 = time.perf_counter()
            dst.copy_(src)
            t = time.perf_counter() - t0
        if i >= 3:  # the first copies are warm-up
            times.append(t)
    assert torch.equal(dst, src), "copy check failed"
    del src, dst
    free_memory(device)
    return 2 * nbytes / statistics.median(times)


def mean_decode_context(prompt_len: int, output_len: int, budget: int | None, block: int) -> float:
    """Mean physical KV length attended by a decode step, over the decode steps of one request
    (tokens prompt_len+1 .. prompt_len+output_len-1 are the inputs; the current one included).
    With a budget, resident KV is compressed back to C*b tokens whenever it reaches (C+1)*b."""
    def phys(n):
        if budget is None or n < budget + block:
            return n
        return budget + (n - budget) % block
    ctx = [phys(prompt_len + j + 1) for j in range(output_len - 1)]
    return sum(ctx) / max(len(ctx), 1)


def decode_weight_bytes(model) -> tuple[int, str]:
    """Bytes of parameters a decode step reads: all of them except the input embedding
    (one row per token is gathered), unless the embedding is tied to the LM head."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())  # tied counted once
    embed = getattr(getattr(model, "model", None), "embed_tokens", None)
    if embed is None and hasattr(model, "get_input_embeddings"):
        embed = model.get_input_embeddings()
    head = getattr(model, "lm_head", None)
    if embed is None:
        return total, "all parameters (embedding not found)"
    if head is not None and head.weight is embed.weight:
        return total, "all parameters (embedding tied to the LM head, counted once)"
    return total - embed.weight.numel() * embed.weight.element_size(), \
        "all parameters except the input embedding (LM head included)"


def roofline(copy_bw, weight_bytes, kv_bytes_per_token, t_full, steps_full, t_prefill,
             steps_prefill, num_requests, output_len, mean_ctx) -> dict | None:
    """Achieved decode bandwidth from the full run minus a prefill-only (output_len=1) run."""
    decode_steps = steps_full - steps_prefill
    decode_time = t_full - t_prefill
    if decode_steps <= 0 or decode_time <= 0:
        return None
    batch = num_requests * (output_len - 1) / decode_steps  # decode tokens per decode step
    kv = batch * mean_ctx * kv_bytes_per_token
    step_bytes = weight_bytes + kv
    step_s = decode_time / decode_steps
    return dict(copy_bandwidth_GBps=copy_bw / 1e9, weight_bytes=weight_bytes,
                kv_bytes_per_step=kv, bytes_per_step=step_bytes, decode_time_s=decode_time,
                decode_steps=decode_steps, step_ms=step_s * 1e3, mean_decode_batch=batch,
                mean_context=mean_ctx, weight_GB=weight_bytes / 1e9, kv_GB_per_step=kv / 1e9,
                bytes_per_step_GB=step_bytes / 1e9, achieved_GBps=step_bytes / step_s / 1e9,
                fraction_of_copy_bw=step_bytes / step_s / copy_bw,
                roofline_step_ms=step_bytes / copy_bw * 1e3,
                roofline_decode_tok_s=batch * copy_bw / step_bytes,
                measured_decode_tok_s=batch / step_s)


def describe_roofline(r: dict, kv_per_token: int, weight_note: str, t_full, t_prefill,
                      steps_prefill, num_requests, output_len) -> str:
    return "\n".join([
        f"decode roofline (ESTIMATE; copy bandwidth {r['copy_bandwidth_GBps']:.1f} GB/s = one "
        f"large device copy, bytes read + written, median of 20):",
        f"  decode time  = full run {t_full:.2f} s - prefill-only run {t_prefill:.2f} s (same "
        f"workload, output_len=1, {steps_prefill} steps) = {r['decode_time_s']:.2f} s",
        f"  decode steps = full-run steps - prefill-only steps = {r['decode_steps']}; "
        f"{r['step_ms']:.2f} ms/step (roofline {r['roofline_step_ms']:.2f} ms)",
        f"  B = {num_requests}*({output_len}-1)/{r['decode_steps']} = "
        f"{r['mean_decode_batch']:.1f} decode tokens/step; mean context c = "
        f"{r['mean_context']:.1f} tokens (prompt + half the output, capped by any budget)",
        f"  bytes/step = weights {gb(r['weight_bytes'])} ({weight_note})",
        f"             + KV read B*c*{kv_per_token} B/token (L*H_kv*D*2*itemsize) = "
        f"{gb(r['kv_bytes_per_step'])} -> {gb(r['bytes_per_step'])}",
        f"  achieved {r['achieved_GBps']:.1f} GB/s = {100 * r['fraction_of_copy_bw']:.1f}% of "
        f"copy bandwidth; decode {r['measured_decode_tok_s']:.0f} tok/s vs roofline "
        f"{r['roofline_decode_tok_s']:.0f} tok/s",
        "  (mixed prefill+decode steps count as decode steps; preemptions would make this rough)"])
