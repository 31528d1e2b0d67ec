"""From finished sequences to what users see: stop strings, text, metrics."""
from zipage.engine.sequence import Sequence
from zipage.outputs import CompletionOutput

STOP_STRING_WINDOW = 64  # trailing output tokens decoded to look for a stop string


class Detokenizer:
    """Text of a request's output; ``tokenizer`` may be None (token-id models)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def stop_string_hit(self, seq: Sequence) -> bool:
        """A stop string in the tail of the output."""
        stops = seq.params.stop
        if not stops or self.tokenizer is None:
            return False
        first = max(seq.num_prompt_tokens, len(seq.token_ids) - STOP_STRING_WINDOW)
        tail = self.tokenizer.decode(seq.token_ids[first:], skip_special_tokens=False)
        return any(s in tail for s in stops)

    def completion(self, seq: Sequence) -> CompletionOutput:
        ids = seq.output_token_ids
        text = ""
        if self.tokenizer is not None:
            text = self.tokenizer.decode(ids, skip_special_tokens=seq.params.skip_special_tokens)
            cut = min((text.index(s) for s in seq.params.stop if s in text), default=len(text))
            text = text[:cut]
        metrics = dict(arrival_time=seq.arrival_time, first_token_time=seq.first_token_time,
                       finish_time=seq.finish_time, num_compressions=seq.num_compressions,
                       peak_kv_tokens=seq.peak_kv_tokens, num_preemptions=seq.num_preemptions)
        if seq.params.forced_tokens is not None:
            records = seq.teacher_records
            metrics["forced_logprobs"] = [r.logprob for r in records]
            metrics["forced_argmax"] = [r.argmax for r in records]
            metrics["forced_greedy_match"] = [r.greedy_match for r in records]
        return CompletionOutput(seq.sample_index, text, ids, seq.finish_reason, metrics)
