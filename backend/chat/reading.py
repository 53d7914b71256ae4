"""One generation read into output events: the tokens an engine generates from a prompt
(``backend.chat.prompt.Generation``) go through one ``OutputProcessor``, which also ends the
generation early (a stop sequence, the end of the turn, a client gone).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from backend.chat.output import OutputEvent, OutputProcessor
from backend.chat.prompt import Generation
from backend.engines.base import ChatEngine, SamplingParams
from backend.protocol.schemas import TokenLogprob

#: Turns a generated token into its log-probability entry (``TokenLogprobsReader``).
DescribeToken = Callable[[int], TokenLogprob]


class Reading:
    """One generation read through one ``OutputProcessor``, which also stops it early (a stop
    sequence or the end of the turn reached)."""

    def __init__(
        self,
        engine: ChatEngine,
        generation: Generation,
        stop: Sequence[str],
        should_stop: Callable[[], bool],
        logprobs: DescribeToken | None = None,
    ) -> None:
        self._engine = engine
        self._generation = generation
        self._outer_stop = should_stop
        self.processor = OutputProcessor(
            engine.tokenizer,
            engine.eos_token_ids,
            prompt_ids=generation.ids,
            stop=stop,
            tool_names=generation.tool_names,
            prefill=generation.prefill,
            logprobs=logprobs,
            json_bounds=generation.constraint.bounds if generation.constraint else None,
            parallel_calls=generation.parallel_calls,
        )

    def should_stop(self) -> bool:
        return self.processor.stopped or self._outer_stop()

    def events(self, params: SamplingParams) -> Iterator[OutputEvent]:
        """Run the generation and read its tokens."""
        generation = self._generation
        options = {"constraint": generation.constraint} if generation.constraint else {}
        tokens = self._engine.generate(generation.ids, params, self.should_stop, **options)
        try:
            yield from self.read(tokens)
        finally:
            tokens.close()

    def read(self, tokens: Iterable[int]) -> Iterator[OutputEvent]:
        """Read ``tokens`` until they end or the processor stops, then finish."""
        for token in tokens:
            yield from self.processor.feed(token)
            if self.processor.stopped:
                break
        yield from self.processor.finish()
