"""What storing token counts costs at indexing time.

Indexes a BEIR corpus lexical-only (no embeddings) three ways into fresh stores and
prints the seconds each took: without token counts, counting chunk by chunk with the
packaged all-MiniLM-L6-v2 tokenizer, and counting each document's chunks in one batch
(what tether does by default).

    .venv/bin/python bench/token_counts.py ../shared/datasets/scifact
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from tether import Settings, Tether
from tether.embed import TokenCounter, resolve_model_path
from tether.eval.beir import index_dataset, load_beir


def main(directory: str) -> None:
    dataset = load_beir(directory)
    counter = TokenCounter(resolve_model_path())
    ways = {
        "no token counts": lambda text: None,
        "one chunk at a time": lambda text: counter(text),
        "one batch per document (default)": None,
    }
    settings = Settings.load(rag={"embeddings": {"enabled": False}})
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
        for number, (label, count_tokens) in enumerate(ways.items()):
            started = time.perf_counter()
            db = Path(tmp) / f"store-{number}.db"
            with Tether(db=db, settings=settings, count_tokens=count_tokens) as t:
                index_dataset(t, dataset)
            print(f"{label:<34} {time.perf_counter() - started:6.1f} s")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/datasets/scifact")
