"""The word cache gives exactly the tokenizer's own token starts and counts, and is only
used for tokenizers that cut words apart on their own."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tether.embed import TokenCounter, resolve_model_path
from tether.embed.wordpieces import WordPieces, read_word_local, word_local
from tether.ingest.chunking import chunk_sections
from tether.ingest.loaders import load_text

tokenizers = pytest.importorskip("tokenizers", reason="the local extra installs tokenizers")

SCIFACT = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "scifact" / "corpus.jsonl"
# Every kind of character a BERT normalizer or pre-tokenizer treats specially: ASCII and
# Unicode punctuation, white space of every kind, control and format characters (removed),
# accents (stripped), CJK (split per character), case that changes length when lowered.
ALPHABET = (
    "aé ü\t\n\r.,;:!?()[]{}'\"-–—…«»日本語中文한국어\u00a0\u2028\u2029\u200b\x00\x0b\x0c"
    "\x1c\x85\ufeff\ufffdß İ Å ﬁ ½ ² ①𝔘😀#$%&*+/<=>@\\^_`|~0123456789ABCxyz\u0301"
)


@pytest.fixture(scope="module")
def tokenizer() -> object:
    tok = tokenizers.Tokenizer.from_file(str(Path(resolve_model_path()) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def real_starts(tokenizer: object, text: str) -> list[int]:
    return [start for start, _ in tokenizer.encode(text, add_special_tokens=False).offsets]


def torture_texts(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 80))) for _ in range(n)]


def scifact_texts(n: int) -> list[str]:
    if not SCIFACT.is_file():
        pytest.skip("the SciFact corpus is not in ../shared/datasets")
    texts = []
    with SCIFACT.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            texts.append(f"{row['title']}\n\n{row['text']}")
            if len(texts) == n:
                break
    return texts


def test_the_packaged_tokenizer_is_word_local() -> None:
    assert read_word_local(str(Path(resolve_model_path()) / "tokenizer.json"))


def test_starts_and_counts_match_the_tokenizer_on_odd_text(tokenizer: object) -> None:
    pieces = WordPieces(tokenizer)
    for text in torture_texts(3000):
        assert list(pieces.starts(text)) == real_starts(tokenizer, text), repr(text)
        assert pieces.count(text) == len(real_starts(tokenizer, text)), repr(text)


def test_plain_ascii_words_asked_of_the_model_match_the_tokenizer(tokenizer: object) -> None:
    """Printable ASCII words skip the tokenizer's pipeline (the model is asked with the
    word lower-cased, as the normalizer would): the same starts, for words of every
    length, including ones over the model's longest word (one unknown token)."""
    pieces = WordPieces(tokenizer)
    assert pieces._ascii is str.lower
    rng = random.Random(3)
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(1, 130))) for _ in range(500)]
    words += ["Tokenization", "UNAFFABLE", "x" * 100, "x" * 101, "Zeroize9", "a1b2c3"]
    text = " ".join(words)
    assert list(pieces.starts(text)) == real_starts(tokenizer, text)


def test_starts_match_the_tokenizer_on_real_abstracts(tokenizer: object) -> None:
    pieces = WordPieces(tokenizer)
    for text in scifact_texts(400) * 2:  # the second pass reads the cache only
        assert list(pieces.starts(text)) == real_starts(tokenizer, text)


def test_a_slice_is_measured_as_the_tokenizer_measures_it_alone(tokenizer: object) -> None:
    pieces = WordPieces(tokenizer)
    rng = random.Random(3)
    for text in torture_texts(500, seed=11) + scifact_texts(50):
        start = rng.randint(0, len(text))
        end = rng.randint(start, len(text))
        expected = [start + s for s in real_starts(tokenizer, text[start:end])]
        assert list(pieces.starts(text, start, end)) == expected, (text, start, end)


def test_a_full_cache_starts_again_and_stays_exact(tokenizer: object) -> None:
    pieces = WordPieces(tokenizer, max_words=50)
    for text in scifact_texts(60):
        assert list(pieces.starts(text)) == real_starts(tokenizer, text)
        assert len(pieces) <= max(50, len(set(text.split())) * 3)
    assert len(pieces) <= 400


def bpe_tokenizer_json(tmp_path: Path) -> Path:
    """A byte-level BPE tokenizer (GPT-2's kind: a space belongs to the next token)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, show_progress=False)
    tok.train_from_iterator(["the pump moves coolant through the loop"] * 50, trainer)
    folder = tmp_path / "bpe"
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    return folder


def test_tokenizers_that_read_across_words_get_no_cache(tmp_path: Path) -> None:
    bpe = json.loads((bpe_tokenizer_json(tmp_path) / "tokenizer.json").read_text())
    assert not word_local(bpe)
    bert = json.loads((Path(resolve_model_path()) / "tokenizer.json").read_text())
    assert word_local(bert)
    remove_spaces = {"type": "Replace", "pattern": {"String": " "}, "content": ""}
    replacing = {**bert, "normalizer": {"type": "Sequence", "normalizers": [remove_spaces]}}
    assert not word_local(replacing)
    assert not word_local({**bert, "pre_tokenizer": {"type": "Metaspace"}})
    assert not read_word_local(str(tmp_path / "missing.json"))


def test_a_counter_without_the_cache_still_measures(tmp_path: Path) -> None:
    counter = TokenCounter(str(bpe_tokenizer_json(tmp_path)))
    text = "the pump moves coolant"
    assert counter.token_starts(text, 0, len(text)) is None
    assert counter(text) == len(counter.offsets_many([text])[0])


class OffsetsOnly:
    """The tokenizer itself, without the word cache: what chunking read before it."""

    def __init__(self, tokenizer: object) -> None:
        self.tokenizer = tokenizer

    def __call__(self, text: str) -> int | None:
        return len(real_starts(self.tokenizer, text))

    def count_many(self, texts: list[str]) -> list[int | None]:
        return [self(text) for text in texts]

    def offsets_many(self, texts: list[str]) -> list[list[tuple[int, int]]] | None:
        return [self.tokenizer.encode(t, add_special_tokens=False).offsets for t in texts]


@pytest.mark.parametrize("window", [128, 512])
def test_chunks_are_the_same_with_and_without_the_cache(tokenizer: object, window: int) -> None:
    """Documents of several chunks (measured by their token starts) and of one (counted
    whole) alike."""
    counter = TokenCounter(resolve_model_path())
    plain = OffsetsOnly(tokenizer)
    texts = [" ".join(scifact_texts(40)[i : i + 6]) for i in range(0, 40, 6)]
    texts += ["".join(torture_texts(40, seed=5)), *scifact_texts(12)]
    sizes = []
    for text in texts:
        loaded = load_text(text, title="A title")

        def chunks(count: object, loaded: object = loaded) -> list[tuple[int, int, int | None]]:
            made = chunk_sections(
                loaded.text,
                list(loaded.sections),
                size=1200,
                overlap=150,
                title=loaded.title,
                count_tokens=count,
                max_tokens=window,
                overlap_tokens=None,
            )
            return [(c.char_start, c.char_end, c.token_count) for c in made]

        cached = chunks(counter)
        sizes.append(len(cached))
        assert cached == chunks(plain)
    assert 1 in sizes and max(sizes) > 1


def test_threads_sharing_a_small_cache_stay_exact(tokenizer: object) -> None:
    """Threads that learn words while others start the cache again each get every word's
    offsets (the cache is read first and filled only with what it lacks)."""
    from concurrent.futures import ThreadPoolExecutor

    pieces = WordPieces(tokenizer, max_words=40)
    texts = scifact_texts(40)
    expected = {text: real_starts(tokenizer, text) for text in texts}

    def measure(i: int) -> bool:
        text = texts[(i * 7) % len(texts)]
        return list(pieces.starts(text)) == expected[text] and pieces.count(text) == len(
            expected[text]
        )

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(measure, range(200)))
