"""Generated token ids to the text deltas a client sees, one tracker per sequence."""

from __future__ import annotations

from typing import Any

from gpu_jobs.serving.protocol import SamplingParams


class TextTracker:
    """Turns one sequence's tokens into text deltas: stops at EOS, at a stop string (cut before it) or at
    ``max_tokens``; holds back text that may be the start of a stop string or half a UTF-8 character.

    ``completion_tokens`` counts the tokens generated up to the stop, without the EOS token.
    """

    def __init__(self, tokenizer: Any, params: SamplingParams, eos_ids: set[int]) -> None:
        self.tokenizer = tokenizer
        self.params = params
        self.eos_ids = eos_ids
        self.ids: list[int] = []
        self.emitted = 0
        self.finish_reason: str | None = None
        self._hold = max((len(s) for s in params.stop), default=1) - 1

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    @property
    def completion_tokens(self) -> int:
        return len(self.ids)

    def feed(self, token_id: int) -> str:
        """Add one generated token; return the text now safe to send (maybe empty)."""
        if self.done:
            return ""
        if token_id in self.eos_ids and not self.params.ignore_eos:
            self.finish_reason = "stop"
            return self.flush()
        self.ids.append(token_id)
        text = self._text()
        cuts = [i for i in (text.find(s) for s in self.params.stop) if i >= 0]
        if cuts:
            self.finish_reason = "stop"
            return self._flush_to(text[: min(cuts)])
        if len(self.ids) >= self.params.max_tokens:
            self.finish_reason = "length"
            return self._flush_to(text)
        end = len(text) - self._hold
        while end > self.emitted and text[end - 1] == "\ufffd":
            end -= 1
        if end <= self.emitted:
            return ""
        delta, self.emitted = text[self.emitted : end], end
        return delta

    def _text(self) -> str:
        return self.tokenizer.decode(self.ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def stop(self, reason: str = "length") -> str:
        """End the sequence early (generation stopped, the client went away); return the text held back."""
        if self.done:
            return ""
        self.finish_reason = reason
        return self.flush()

    def flush(self) -> str:
        return self._flush_to(self._text())

    def _flush_to(self, text: str) -> str:
        delta = text[self.emitted :]
        self.emitted = max(self.emitted, len(text))
        return delta
