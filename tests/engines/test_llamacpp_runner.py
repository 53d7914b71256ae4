"""The llama.cpp batching runner's bookkeeping, offline, against a stand-in for llama.cpp.

The stand-in keeps each sequence's KV cache as a list of (position, token) and refuses any
evaluation at a position that does not follow the cache, so a wrong position, a forgotten
removal or two requests crossing sequences fails loudly. Its "model" makes the next token a
function of the whole sequence so far, so an answer computed on a wrong cache is also wrong.
"""

from __future__ import annotations

import ctypes
import pickle
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np
import pytest

from backend.engines.llamacpp_batch import NativeDecodeError
from backend.engines.llamacpp_runner import MAX_UNREAD, PREFILL_CHUNK, BatchingRunner
from backend.engines.llamacpp_slots import SlotCache, chunk_ends
from tests.waiting import wait_for

VOCAB = 97
END = 0


def next_token(tokens: list[int]) -> int:
    """The stand-in model: a deterministic function of every token so far (never END)."""
    return 1 + (sum((i + 1) * t for i, t in enumerate(tokens)) % (VOCAB - 1))


def expected_answer(prompt: list[int], count: int) -> list[int]:
    tokens, answer = list(prompt), []
    for _ in range(count):
        answer.append(next_token(tokens))
        tokens.append(answer[-1])
    return answer


class FakeLlamaCpp:
    """The few llama.cpp calls the runner makes, with a KV cache of ``cells`` cells."""

    def __init__(self, cells: int, step_delay: float = 0.0) -> None:
        self.cells = cells
        self.step_delay = step_delay
        self.kv: dict[int, list[tuple[int, int]]] = {}
        self.batch_sizes: list[int] = []
        self.fail_next = False
        self.clears = 0
        #: Evaluations wait for this to be set (a test holds the runner while it queues work).
        self.gate = threading.Event()
        self.gate.set()
        self._rows: list[np.ndarray] = []
        self._hidden: list[np.ndarray] = []
        self.embeddings = False
        #: Sizes of the evaluations made with hidden states kept.
        self.hidden_batches: list[int] = []

    def llama_get_memory(self, ctx):
        return "memory"

    def llama_batch_init(self, n_tokens, embd, n_seq_max):
        return SimpleNamespace(
            n_tokens=0,
            token=[0] * n_tokens,
            pos=[0] * n_tokens,
            n_seq_id=[0] * n_tokens,
            seq_id=[[0] for _ in range(n_tokens)],
            logits=[False] * n_tokens,
        )

    def llama_batch_free(self, batch):
        pass

    def llama_memory_seq_rm(self, memory, seq_id, p0, p1):
        assert p1 == -1
        self.kv[seq_id] = [(p, t) for p, t in self.kv.get(seq_id, []) if p < p0]
        return True

    def llama_memory_clear(self, memory, data):
        self.kv.clear()
        self.clears += 1

    def llama_state_seq_get_size(self, ctx, seq_id):
        return len(pickle.dumps(self.kv.get(seq_id, [])))

    def llama_state_seq_get_data(self, ctx, dst, size, seq_id):
        data = pickle.dumps(self.kv.get(seq_id, []))
        ctypes.memmove(dst, data, len(data))
        return len(data)

    def llama_state_seq_set_data(self, ctx, src, size, seq_id):
        assert not self.kv.get(seq_id), "restored into an emptied cache"
        self.kv[seq_id] = pickle.loads(bytes(src[:size]))
        return size

    def llama_memory_seq_cp(self, memory, src, dst, p0, p1):
        assert not self.kv.get(dst), "the runner empties a slot before sharing into it"
        self.kv[dst] = [(p, t) for p, t in self.kv.get(src, []) if p0 <= p < p1]

    def llama_decode(self, ctx, batch):
        self.gate.wait()
        time.sleep(self.step_delay)
        if self.fail_next:
            self.fail_next = False
            return -3
        entries = [
            (batch.seq_id[i][0], batch.token[i], batch.pos[i], batch.logits[i])
            for i in range(batch.n_tokens)
        ]
        if sum(len(kv) for kv in self.kv.values()) + len(entries) > self.cells:
            return 1  # no room in the cache
        self._rows, self._hidden = [], []
        if self.embeddings:
            # llama.cpp outputs every token of a batch while it keeps hidden states.
            assert all(wants for *_, wants in entries), "a hidden-state batch outputs all"
            self.hidden_batches.append(len(entries))
        for seq_id, token, position, wants_logits in entries:
            cache = self.kv.setdefault(seq_id, [])
            assert position == len(cache), f"seq {seq_id}: position {position}, cache {len(cache)}"
            cache.append((position, token))
            if wants_logits:
                row = np.full(VOCAB, -10.0, dtype=np.float32)
                row[next_token([t for _, t in cache])] = 10.0
                self._rows.append(row)
                self._hidden.append(fake_hidden([t for _, t in cache]))
            else:
                self._rows.append(None)
        self.batch_sizes.append(len(entries))
        return 0

    def llama_get_logits_ith(self, ctx, row):
        return self._rows[row].ctypes.data_as(ctypes.POINTER(ctypes.c_float))

    def llama_set_embeddings(self, ctx, value):
        self.embeddings = bool(value)

    def llama_get_embeddings_ith(self, ctx, row):
        return self._hidden[row].ctypes.data_as(ctypes.POINTER(ctypes.c_float))


HIDDEN = 4


def fake_hidden(tokens: list[int]) -> np.ndarray:
    """The stand-in's "hidden state" after ``tokens``: a function of all of them."""
    return np.array([len(tokens), sum(tokens), tokens[-1], next_token(tokens)], np.float32)


def greedy(logits: np.ndarray) -> int:
    return int(np.argmax(logits))


def generate(runner, prompt, budget, should_stop=lambda: False):
    return list(runner.generate(prompt, budget, greedy, should_stop, frozenset({END})))


def run_together(runner, native, jobs: list[Callable[[], list[int]]]) -> list[list[int]]:
    """Each job's answer, the jobs run on threads of their own and all submitted before the
    runner evaluates anything (the first evaluation waits for the last submission)."""
    answers: dict[int, list[int]] = {}

    def run(i: int) -> None:
        answers[i] = jobs[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    native.gate.clear()
    for thread in threads:
        thread.start()
    wait_for(lambda: len(runner._waiting) + len(runner._running()) == len(jobs))
    native.gate.set()
    for thread in threads:
        thread.join()
    return [answers[i] for i in range(len(jobs))]


def test_a_lone_generation_follows_its_prompt(make_runner):
    runner, native = make_runner()
    prompt = list(range(1, 20))
    assert generate(runner, prompt, 10) == expected_answer(prompt, 10)
    # The prompt in one call, then one call per generated token but the last.
    assert native.batch_sizes == [19] + [1] * 9


def test_long_prompts_are_evaluated_in_aligned_chunks(make_runner):
    runner, native = make_runner()
    prompt = [5] * (2 * PREFILL_CHUNK + 7)
    assert generate(runner, prompt, 3) == expected_answer(prompt, 3)
    assert native.batch_sizes[:3] == [PREFILL_CHUNK, PREFILL_CHUNK, 7]


def test_concurrent_generations_share_decode_calls_and_keep_their_own_answers(make_runner):
    runner, native = make_runner(step_delay=0.002)
    prompts = [[i + 1] * (10 + i) for i in range(4)]
    answers = run_together(runner, native, [lambda p=p: generate(runner, p, 40) for p in prompts])
    for i, prompt in enumerate(prompts):
        assert answers[i] == expected_answer(prompt, 40)
    assert runner.largest_decode_batch == 4
    assert max(native.batch_sizes) >= 4


def test_a_cached_prompt_prefix_is_reused_in_whole_chunks(make_runner):
    runner, native = make_runner(slots=1)
    shared = [3] * (PREFILL_CHUNK + 50)
    generate(runner, shared + [1, 2], 2)
    native.batch_sizes.clear()
    second = shared + [9, 9, 9]
    assert generate(runner, second, 2) == expected_answer(second, 2)
    # The first whole chunk came from the cache; the rest was evaluated.
    assert native.batch_sizes[0] == len(second) - PREFILL_CHUNK


def test_a_prompt_prefix_cached_in_another_slot_is_shared(make_runner):
    """A second prompt with the same long beginning, while the first still runs elsewhere."""
    runner, native = make_runner(slots=2, step_delay=0.002)
    shared = [4] * (2 * PREFILL_CHUNK + 10)
    first = runner.generate(shared + [1], 50, greedy, lambda: False, frozenset({END}))
    next(first)  # the first prompt is evaluated and its slot keeps generating
    native.batch_sizes.clear()
    second = shared + [2, 2]
    assert generate(runner, second, 3) == expected_answer(second, 3)
    # Only what follows the two shared chunks was evaluated for the second prompt.
    assert len(second) - 2 * PREFILL_CHUNK in native.batch_sizes
    assert max(native.batch_sizes) < PREFILL_CHUNK
    assert list(first) == expected_answer(shared + [1], 50)[1:]


def test_a_request_arriving_alone_finds_only_its_own_prefix_in_the_cache(make_runner):
    """What a request alone reads must not depend on what ran before it: the cache is emptied
    but for the prefix it reuses, which is put back from cell 0 (a fresh engine's layout)."""
    runner, native = make_runner(slots=3)
    shared = [5] * (PREFILL_CHUNK + 20)
    generate(runner, [7] * 40, 3)
    generate(runner, shared + [1], 3)
    native.batch_sizes.clear()
    second = shared + [2, 2]
    assert generate(runner, second, 3) == expected_answer(second, 3)
    # Only the reused chunk is left in the cache, in one sequence: nothing else ran before.
    assert native.batch_sizes[0] == len(second) - PREFILL_CHUNK
    assert [len(kv) for kv in native.kv.values() if kv] == [len(second) + 2]
    # Three layouts; the third cut the second's whole prompt, set aside, to its shared chunk
    # (``SlotCache.lay_out_alone``: copied out and laid out again, one more clear).
    assert runner.fresh_layouts == 3 and native.clears == 4


def test_a_fresh_prefix_emptied_by_a_lone_request_is_set_aside_and_put_back(make_runner):
    """An agent's tools prompt, then a lone request that shares none of it (the check whether
    to call a tool), then the tools prompt again: it comes back from where it was set aside,
    at cells 0 onwards, and only the new part is evaluated."""
    runner, native = make_runner(slots=3)
    tools = [5] * (2 * PREFILL_CHUNK + 20)
    generate(runner, tools + [1], 3)
    generate(runner, [8] * 30, 3)  # the cache now holds only this request
    assert [len(kv) for kv in native.kv.values() if kv] == [30 + 2]
    native.batch_sizes.clear()
    again = tools + [3]
    assert generate(runner, again, 3) == expected_answer(again, 3)
    assert native.batch_sizes[0] == len(again) - 2 * PREFILL_CHUNK
    assert [len(kv) for kv in native.kv.values() if kv] == [len(again) + 2]
    # Sharing one chunk of a longer prefix set aside: that chunk alone is laid out.
    generate(runner, [9] * 10, 1)
    native.batch_sizes.clear()
    other = [5] * PREFILL_CHUNK + [6] * 40
    assert generate(runner, other, 2) == expected_answer(other, 2)
    assert native.batch_sizes[0] == 40
    assert [len(kv) for kv in native.kv.values() if kv] == [len(other) + 1]


def test_set_aside_prefixes_are_bounded_least_recently_used_first():
    native = FakeLlamaCpp(4096)
    cache = SlotCache(native, "ctx", slots=1)
    slot = cache.slots[0]

    def evaluated_alone(tokens: list[int]) -> None:
        ends = chunk_ends(tokens)
        slot = cache.lay_out_alone(tokens, ends)
        for end in ends:
            if end > len(slot.cached):
                chunk = tokens[len(slot.cached) : end]
                native.kv.setdefault(slot.seq_id, []).extend(
                    (len(slot.cached) + i, t) for i, t in enumerate(chunk)
                )
                cache.evaluated(slot, chunk, alone=True)

    prompts = [[k] * PREFILL_CHUNK + [0] for k in (1, 2, 3)]  # each set aside whole
    for prompt in prompts:
        evaluated_alone(prompt)
    evaluated_alone([4, 4])
    assert list(cache.set_aside) == [tuple(p) for p in prompts]
    one = len(cache.set_aside[tuple(prompts[0])].cells)
    two = len(cache.set_aside[tuple(prompts[1])].cells)
    cache._set_aside_bytes = one + two  # room for two long ones: the least recently used go
    # Sets [4, 4] aside, then puts the first prompt's chunk back: the first is now the most
    # recently used, and the second and third go.
    evaluated_alone([*prompts[0][:PREFILL_CHUNK], 7])
    assert list(cache.set_aside) == [(4, 4), tuple(prompts[0])]
    assert slot.cached[:PREFILL_CHUNK] == prompts[0][:PREFILL_CHUNK]


def test_a_prefix_computed_beside_another_request_is_not_reused_alone(make_runner):
    """A chunk evaluated while another request ran lies in cells a fresh engine would not
    use; a later lone request evaluates it again rather than read it from there."""
    runner, native = make_runner(slots=2, step_delay=0.002)
    first = runner.generate([6] * 10, 200, greedy, lambda: False, frozenset({END}))
    next(first)
    shared = [4] * (PREFILL_CHUNK + 10)
    generate(runner, shared + [1], 2)  # evaluated beside the first
    first.close()
    wait_for(lambda: not runner._running())
    native.batch_sizes.clear()
    second = shared + [3]
    assert generate(runner, second, 2) == expected_answer(second, 2)
    assert native.batch_sizes[0] == PREFILL_CHUNK  # evaluated anew, from its first chunk


def test_one_at_a_time_runs_no_request_beside_another(make_runner):
    native = FakeLlamaCpp(4096)
    runner = BatchingRunner(
        "ctx",
        VOCAB,
        slots=4,
        kv_cells=4096,
        native=native,
        suffix_sequences=4,
        batch_tokens=256,
        one_at_a_time=True,
    )
    try:
        prompts = [[k + 1] * (5 + k) for k in range(4)]
        answers: dict[int, list[int]] = {}
        threads = [
            threading.Thread(
                target=lambda k=k: answers.__setitem__(k, generate(runner, prompts[k], 6))
            )
            for k in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert answers == {k: expected_answer(prompts[k], 6) for k in range(4)}
        assert runner.largest_decode_batch == 1
        assert runner.fresh_layouts == 4
    finally:
        runner.close()


def test_closing_the_iterator_frees_the_place(make_runner):
    runner, _ = make_runner(slots=1, step_delay=0.001)
    tokens = runner.generate([1, 2, 3], 10_000, greedy, lambda: False, frozenset({END}))
    assert next(tokens) == expected_answer([1, 2, 3], 1)[0]
    tokens.close()
    # The only slot is free again: another request runs to its end.
    assert generate(runner, [4, 5], 5) == expected_answer([4, 5], 5)


class _PausingRunner(BatchingRunner):
    """Stops once between a step's ``_drop_finished`` and its ``_admit`` when asked."""

    def __init__(self, *args, **kwargs) -> None:
        self.pause = threading.Event()
        self.paused = threading.Event()
        self.go_on = threading.Event()
        super().__init__(*args, **kwargs)

    def _drop_finished(self) -> None:
        super()._drop_finished()
        if self.pause.is_set():
            self.pause.clear()
            self.paused.set()
            self.go_on.wait()


def test_a_request_queued_after_its_caller_closed_a_generation_runs_alone():
    # The close lands just after the runner's step dropped finished requests, then the
    # caller's next request is queued: it must still be laid out alone, not beside the
    # generation its caller has closed.
    native = FakeLlamaCpp(4096)
    runner = _PausingRunner("ctx", VOCAB, slots=4, kv_cells=4096, native=native)
    try:
        first = runner.generate([1, 2, 3], 10_000, greedy, lambda: False, frozenset({END}))
        next(first)
        runner.pause.set()
        wait_for(runner.paused.is_set, "the runner between dropping and admitting")
        first.close()
        answer: list[int] = []
        second = threading.Thread(target=lambda: answer.extend(generate(runner, [4, 5], 5)))
        second.start()
        wait_for(lambda: len(runner._waiting) == 1, "the second request queued")
        runner.go_on.set()
        second.join()
        assert answer == expected_answer([4, 5], 5)
        assert runner.fresh_layouts == 2 and runner.largest_decode_batch == 1
    finally:
        runner.go_on.set()
        runner.close()


def test_should_stop_ends_a_generation_between_steps(make_runner):
    runner, _ = make_runner()
    produced = []

    def stop() -> bool:
        return len(produced) >= 3

    for token in runner.generate([1, 2], 100, greedy, stop, frozenset({END})):
        produced.append(token)
    assert 3 <= len(produced) <= 3 + MAX_UNREAD  # the runner may run ahead of the reader


@pytest.mark.parametrize(
    ("cells", "lengths", "budgets"),
    [
        (300, (100, 100), (90, 90)),  # both decoding when the cache fills
        (800, (50, 430), (400, 300)),  # a prompt of several chunks, resumed in chunks
    ],
)
def test_a_full_cache_sets_the_newest_request_aside_and_resumes_it(
    make_runner, cells, lengths, budgets
):
    """Two generations that cannot both fit: both finish, each with its own right answer.

    The first one's reader waits until the second has started (the first pauses, MAX_UNREAD
    tokens ahead), so the two overlap whatever the machine's speed.
    """
    runner, native = make_runner(cells=cells, slots=2, step_delay=0.002)
    prompts = [[i + 1] * length for i, length in enumerate(lengths)]
    first = runner.generate(prompts[0], budgets[0], greedy, lambda: False, frozenset({END}))
    answers = {0: [next(first)]}
    second = threading.Thread(
        target=lambda: answers.update({1: generate(runner, prompts[1], budgets[1])})
    )
    second.start()
    time.sleep(0.05)
    answers[0] += list(first)
    second.join()
    for i, prompt in enumerate(prompts):
        assert answers[i] == expected_answer(prompt, budgets[i])
    assert runner.preemptions >= 1
    assert sum(len(kv) for kv in native.kv.values()) <= cells


def test_a_generation_waits_for_a_reader_that_falls_behind(make_runner):
    runner, native = make_runner()
    tokens = runner.generate([1, 2, 3], 500, greedy, lambda: False, frozenset({END}))
    next(tokens)
    time.sleep(0.2)  # the reader stops; generation must not run on to the budget
    assert len(native.batch_sizes) <= MAX_UNREAD + 2
    assert list(tokens) == expected_answer([1, 2, 3], 500)[1:]


def test_scoring_gives_the_logits_after_the_prompt(make_runner):
    runner, _ = make_runner()
    prompt = [7, 8, 9]
    assert runner.score(prompt, lambda logits: int(np.argmax(logits))) == next_token(prompt)


def test_a_failed_evaluation_fails_its_requests_only(make_runner):
    runner, native = make_runner()
    native.fail_next = True
    with pytest.raises(NativeDecodeError):
        generate(runner, [1, 2, 3], 5)
    assert generate(runner, [1, 2, 3], 5) == expected_answer([1, 2, 3], 5)


def top(logits):
    return int(np.argmax(logits))


def test_suffixes_are_scored_on_one_evaluation_of_their_shared_prefix(make_runner):
    runner, native = make_runner(suffix_sequences=4)
    prefix = [(7 * i) % 50 + 1 for i in range(300)]  # longer than two prefill chunks
    suffixes = [[i + 1] * (i % 3 + 1) for i in range(6)]  # six suffixes: two evaluations
    other = [[5, 6, 7], [8]]
    scored = runner.score_suffixes([(prefix, suffixes), ([9] * 40, other)], top)
    assert scored == [
        [next_token(prefix + s) for s in suffixes],
        [next_token([9] * 40 + s) for s in other],
    ]
    # The prefixes in chunks of up to 128 tokens, the first group's suffixes in two calls
    # (four sequences for suffixes), the second's in one: nothing evaluated twice.
    assert sorted(native.batch_sizes) == [3 + 1, 3 + 2, 1 + 2 + 3 + 1, 40, 44, 128, 128]
    # The suffixes' sequences are empty again; the slots keep the prefixes for reuse.
    assert all(not native.kv.get(seq) for seq in range(4, 8))
    again = runner.score_suffixes([(prefix, [[3], [4]])], top)
    assert again == [[next_token([*prefix, 3]), next_token([*prefix, 4])]]
    assert native.batch_sizes[-2:] == [len(prefix) % PREFILL_CHUNK, 2]  # whole chunks reused


def test_a_group_of_one_suffix_is_evaluated_as_one_prompt(make_runner):
    """As a lone prompt always is: in aligned chunks, its last token with the chunk before
    it, not alone on top of the rest."""
    runner, native = make_runner(suffix_sequences=4)
    prefix = [(3 * i) % 40 + 1 for i in range(200)]
    scored = runner.score_suffixes([(prefix, [[5, 6]]), ([9] * 10, [[1], [2]])], top)
    others = [next_token([9] * 10 + s) for s in ([1], [2])]
    assert scored == [[next_token([*prefix, 5, 6])], others]
    # The lone prompt in two aligned chunks (128, then 74 tokens ending on 5, 6); the other
    # group's prefix, then its two suffixes together.
    assert sorted(native.batch_sizes) == [1 + 1, 10, 202 - 128, 128]
    assert runner.score_suffixes([(prefix, [[5, 6]])], top) == scored[:1]


def test_hidden_states_are_read_at_each_suffix_end_in_a_batch_of_the_ends_alone(make_runner):
    """llama.cpp outputs every token of a batch that keeps hidden states, so only the last
    tokens go in it; a lone prompt's last token too, so every reading is laid out alike."""
    runner, native = make_runner(suffix_sequences=4)
    prefix = [(5 * i) % 30 + 1 for i in range(150)]
    suffixes = [[1, 2, 3], [4], [5, 6]]

    def read(logits, hidden):
        return top(logits), hidden.tolist()

    scored = runner.score_suffixes([(prefix, suffixes), ([9] * 10, [[7, 8]])], read, hidden=True)
    expected = [
        [(next_token(prefix + s), fake_hidden(prefix + s).tolist()) for s in suffixes],
        [(next_token([9] * 10 + [7, 8]), fake_hidden([9] * 10 + [7, 8]).tolist())],
    ]
    assert scored == expected
    assert sorted(native.hidden_batches) == [1, 3]  # the lone prompt's end; the three ends
    assert not native.embeddings  # switched off again after each
    plain = runner.score_suffixes([(prefix, suffixes)], top)
    assert plain == [[next_token(prefix + s) for s in suffixes]]
    assert sorted(native.hidden_batches) == [1, 3]


def test_a_bad_suffix_is_refused_before_anything_runs(make_runner):
    runner, native = make_runner()
    for groups in ([([1, 2], [[]])], [([], [[1]])], [([1], [[1] * 257])]):
        with pytest.raises(ValueError, match="suffixes of 1 to 256"):
            runner.score_suffixes(groups, top)
    assert native.batch_sizes == []
    plain, _ = make_runner(suffix_sequences=0)
    with pytest.raises(ValueError, match="without sequences for suffixes"):
        plain.score_suffixes([([1], [[2]])], top)


def test_a_failing_chooser_fails_its_own_request(make_runner):
    runner, _ = make_runner()

    def broken(logits):
        raise ValueError("mask error")

    with pytest.raises(ValueError, match="mask error"):
        list(runner.generate([1, 2], 5, broken, lambda: False, frozenset({END})))
    assert generate(runner, [1, 2], 3) == expected_answer([1, 2], 3)


def test_closing_the_runner_fails_waiting_requests():
    native = FakeLlamaCpp(4096)
    runner = BatchingRunner("ctx", VOCAB, slots=1, kv_cells=4096, native=native)
    runner.close()
    with pytest.raises(RuntimeError, match="closed"):
        generate(runner, [1], 1)
