"""The step loop behind ``LLM.generate``: schedule, execute, post-process, report."""
import time

from tqdm.auto import tqdm

from zipage.engine.sequence import Sequence
from zipage.outputs import CompletionOutput, GenerateStats, RequestOutput


def _stop_string_hit(llm, seq: Sequence, end: int) -> str | None:
    """A stop string in the output up to token index `end` (exclusive)."""
    stops = seq.params.stop
    if not stops or llm.tokenizer is None:
        return None
    first = max(seq.num_prompt_tokens, end - 64)
    tail = llm.tokenizer.decode(seq.token_ids[first:end], skip_special_tokens=False)
    return next((s for s in stops if s in tail), None)


def _completion(llm, seq: Sequence) -> CompletionOutput:
    ids = seq.output_token_ids
    text = ""
    if llm.tokenizer is not None:
        text = llm.tokenizer.decode(ids, skip_special_tokens=seq.params.skip_special_tokens)
        for stop in seq.params.stop:
            if stop in text:
                text = text[:text.index(stop)]
    metrics = dict(arrival_time=seq.arrival_time, first_token_time=seq.first_token_time,
                   finish_time=seq.finish_time, num_compressions=seq.num_compressions,
                   peak_kv_tokens=seq.peak_kv_tokens, num_preemptions=seq.num_preemptions)
    records = llm.runner.teacher_records.pop(seq.seq_id, None)
    if records is not None:
        metrics["forced_logprobs"] = [lp for lp, _, _ in records]
        metrics["forced_argmax"] = [top for _, top, _ in records]
        metrics["forced_greedy_match"] = [m for _, _, m in records]
    return CompletionOutput(seq.sample_index, text, ids, seq.finish_reason, metrics)


def run_requests(llm, prompts, params, use_tqdm, on_sample):
    scheduler, runner = llm.scheduler, llm.runner
    results: list[RequestOutput] = []
    seqs: list[Sequence] = []
    start = time.perf_counter()
    for i, (prompt, p) in enumerate(zip(prompts, params)):
        ids = llm._encode(prompt)
        error = llm._check_prompt(ids)
        results.append(RequestOutput(i, prompt if isinstance(prompt, str) else None, ids, [], error))
        if error:
            continue
        for k in range(p.n):
            seq = Sequence(ids, p, llm.config.block_size, i, k, llm._seed(p, i, k))
            seq.arrival_time = start
            seqs.append(seq)
            scheduler.add(seq)
    stats = GenerateStats(num_kv_blocks=llm.num_kv_blocks, max_concurrency=llm.max_concurrency)
    preempt0, compress0 = scheduler.num_preemptions, runner.compression_time_s
    bar = tqdm(total=len(seqs), desc="generate", disable=not use_tqdm, dynamic_ncols=True)
    running_sum = 0
    emitted: set[int] = set()
    inflight = None  # asynchronous scheduling: (out, handle) of the launched, uncollected step

    def complete(out, handle) -> None:
        t = time.perf_counter()
        sampled = runner.collect(handle)  # waits for the device: execute time
        stats.execute_time_s += time.perf_counter() - t
        for sid in emitted.intersection(handle.seq_ids):  # stopped before this step was known
            runner.teacher_records.pop(sid, None)
        finished = scheduler.fill(out, sampled, llm.eos_token_ids)
        now = time.perf_counter()
        for seq, index, peak, compressions in out.pending:
            if index < len(seq) and seq.seq_id in sampled:
                seq.first_token_time = seq.first_token_time or now
                if seq not in finished and _stop_string_hit(llm, seq, index + 1):
                    scheduler.finish_early(seq, "stop", index + 1, peak, compressions)
                    finished.append(seq)
        for seq in finished:
            seq.finish_time = now
            stats.num_output_tokens += seq.num_output_tokens
            completion = _completion(llm, seq)
            emitted.add(seq.seq_id)
            results[seq.prompt_index].outputs.append(completion)
            if on_sample is not None:
                on_sample(seq.prompt_index, completion)
        if finished:
            bar.update(len(finished))

    while scheduler.has_unfinished or inflight is not None:
        t0 = time.perf_counter()
        out = scheduler.schedule() if scheduler.has_unfinished else None
        if out is not None and out.is_empty:
            if inflight is None:
                raise RuntimeError(f"scheduler made no progress: {len(scheduler.running)} running, "
                                   f"{len(scheduler.waiting)} waiting, "
                                   f"{llm.block_manager.num_free_blocks} free blocks")
            out = None  # nothing runnable until the step in flight is known
        t1 = time.perf_counter()
        handle, executed = None, stats.execute_time_s
        if out is not None:
            stats.num_steps += 1
            running_sum += len(scheduler.running)
            stats.peak_running = max(stats.peak_running, len(scheduler.running))
            handle = runner.launch(out, inflight[1] if inflight else None)
        t2 = time.perf_counter()
        if out is not None:
            scheduler.advance(out)
        if inflight is not None:
            complete(*inflight)
            inflight = None
        if out is not None:
            if llm.config.async_scheduling:
                inflight = (out, handle)
            else:
                complete(out, handle)
        now = time.perf_counter()
        stats.execute_time_s += t2 - t1
        stats.schedule_time_s += (now - t0) - (stats.execute_time_s - executed)
        if use_tqdm and stats.num_steps % 8 == 0:
            elapsed = max(now - start, 1e-9)
            done = stats.num_output_tokens + sum(s.num_output_tokens for s in scheduler.running)
            bar.set_postfix(out_tok_s=f"{done / elapsed:.0f}", running=len(scheduler.running),
                            waiting=len(scheduler.waiting), refresh=False)
    bar.close()
    stats.wall_time_s = time.perf_counter() - start
    stats.num_prompt_tokens = sum(seq.num_prompt_tokens for seq in seqs)
    stats.mean_running = running_sum / max(stats.num_steps, 1)
    stats.num_preemptions = scheduler.num_preemptions - preempt0
    stats.compression_time_s = runner.compression_time_s - compress0
    stats.num_compressions = sum(seq.num_compressions for seq in seqs)
    llm.last_stats = stats
    for r in results:
        r.outputs.sort(key=lambda c: c.index)
    return results
