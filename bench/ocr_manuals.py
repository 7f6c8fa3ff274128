"""OCR on scanned pages of real manuals, with questions written by reading them.

The pages are those that answer the answerable questions of ``bench/manuals`` (five
Debian PDF manuals, fetched by ``bench/manuals/fetch.py``): each is rendered at 200 dpi
(pypdfium2), made to look scanned (turned by up to a degree, grey, noise, JPEG at quality
70) and put into an image-only PDF per manual, which tether indexes through its OCR (its
real loader, in its worker processes). Then, for each question:

- **in the page text**: its verbatim answer is in the OCR text of its scanned page
  (compared case- and space-insensitively);
- **in the context**: its answer is in ``Tether.retrieve(question).context``
  (``min_relevance`` 0: what OCR lets retrieval find, not what the threshold keeps);
- **nearly in the context**: a stretch of the context matches the answer with at most
  one character in ten read wrong (``difflib``'s ratio >= 0.9: "fags" for "flags", a
  hyphen for an underscore), as a reader would still find it.

The store is indexed with the defaults (the local model's vectors too); the questions are
asked twice: through a handle with embeddings off (a lexical retrieval: what OCR alone
lets retrieval find) and through the default hybrid one.

    .venv/bin/python bench/ocr_manuals.py [--engine auto|tesseract|rapidocr] [--limit N] [--json]

Needs the manuals (``python3 bench/manuals/fetch.py``), the ``ocr`` extra and pypdfium2
(the ``bench`` extra). Results of a run are in ``bench/ocr_manuals.md``.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANUALS = HERE / "manuals"


def scanned(pdf: Path, pages: list[int], out: Path, seed: int = 7) -> Path:
    """An image-only PDF of ``pages`` (1-based, in order) of ``pdf``, made to look scanned."""
    import pypdfium2
    from PIL import Image, ImageFilter

    rng = random.Random(seed)
    document = pypdfium2.PdfDocument(str(pdf))
    images = []
    for number in pages:
        image = document[number - 1].render(scale=200 / 72).to_pil().convert("L")
        image = image.rotate(rng.uniform(-1.0, 1.0), expand=True, fillcolor=255)
        image = image.filter(ImageFilter.GaussianBlur(0.6))
        noise = Image.effect_noise(image.size, 18)
        image = Image.blend(image, noise, 0.08)
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=70)
        images.append(Image.open(io.BytesIO(buffer.getvalue())))
    images[0].save(out, "PDF", resolution=200, save_all=True, append_images=images[1:])
    return out


def _plain(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def run(limit: int | None, engine: str = "auto") -> dict[str, object]:
    from tether import Settings, Tether

    spec = json.loads((MANUALS / "questions.json").read_text())
    asked = [q for q in spec["questions"] if q["kind"] == "answerable"][:limit]
    by_document: dict[str, list[int]] = defaultdict(list)
    for q in asked:
        by_document[q["document"]] += [p for p in q["pages"] if p not in by_document[q["document"]]]
    lexical = Settings.load(rag={"embeddings": {"enabled": False}, "ocr_engine": engine})
    hybrid_settings = Settings.load(rag={"ocr_engine": engine})
    with (
        tempfile.TemporaryDirectory(prefix="tether-ocr-") as tmp,
        Tether(Path(tmp) / "t.db", settings=hybrid_settings) as t,  # hybrid retrieval
        Tether(Path(tmp) / "t.db", settings=lexical) as words_only,
    ):
        where: dict[tuple[str, int], tuple[str, int]] = {}
        started = time.perf_counter()
        for name, pages in by_document.items():
            pages.sort()
            path = scanned(MANUALS / "pdfs" / f"{name}.pdf", pages, Path(tmp) / f"{name}.pdf")
            [result] = t.add(path, workspace_id=name)
            where.update(((name, p), (result.document_id, i)) for i, p in enumerate(pages, 1))
        seconds = time.perf_counter() - started
        rows = [_ask(words_only, q, where) for q in asked]
        hybrid = [_ask(t, q, where) for q in asked]
    count = sum(len(p) for p in by_document.values())
    return {
        "engine": engine,
        "questions": len(rows),
        "pages": count,
        "seconds_per_page": round(seconds / count, 2),
        "answer_in_page_text": _share(rows, "in_page"),
        "answer_in_context": _share(rows, "in_context"),
        "answer_nearly_in_context": _share(rows, "nearly_in_context"),
        "hybrid_answer_in_context": _share(hybrid, "in_context"),
        "hybrid_answer_nearly_in_context": _share(hybrid, "nearly_in_context"),
        "missed": [r for r in rows if not r["in_context"]],
        "hybrid_missed": [r["id"] for r in hybrid if not r["nearly_in_context"]],
    }


def _share(rows: list[dict], key: str) -> float:
    return round(sum(r[key] for r in rows) / len(rows), 3)


def _ask(t: object, q: dict[str, object], where: dict[tuple[str, int], tuple[str, int]]) -> dict:
    document_id, page = where[(str(q["document"]), q["pages"][0])]  # type: ignore[index]
    page_text = " ".join(
        c.content
        for c in t.chunks(document_id)
        if c.page == page  # type: ignore[attr-defined]
    )
    result = t.retrieve(  # type: ignore[attr-defined]
        str(q["question"]), scope="workspace", workspace_id=q["document"], min_relevance=0.0
    )
    answer, context = _plain(str(q["answer"])), _plain(result.context)
    return {
        "id": q["id"],
        "in_page": answer in _plain(page_text),
        "in_context": answer in context,
        "nearly_in_context": answer in context or _nearly(answer, context),
    }


def _nearly(answer: str, text: str, ratio: float = 0.9) -> bool:
    """Whether a stretch of ``text`` as long as ``answer`` matches it with at most a
    tenth of its characters read otherwise."""
    import difflib

    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(answer)
    for start in range(0, max(1, len(text) - len(answer) + 1), 4):
        matcher.set_seq1(text[start : start + len(answer) + 4])
        if matcher.real_quick_ratio() >= ratio and matcher.ratio() >= ratio:
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="the first N questions only")
    parser.add_argument(
        "--engine", choices=("auto", "tesseract", "rapidocr"), default="auto", help="rag.ocr_engine"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not (MANUALS / "pdfs").is_dir():
        print("fetch the manuals first: python3 bench/manuals/fetch.py", file=sys.stderr)
        return 2
    report = run(args.limit, args.engine)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{report['questions']} questions over {report['pages']} scanned pages ({args.engine})")
    print(f"OCR (and indexing): {report['seconds_per_page']} s a page")
    print(f"answer in its page's OCR text: {report['answer_in_page_text']:.1%}")
    print(f"answer in the retrieved context: {report['answer_in_context']:.1%}")
    print(f"answer nearly in it (9 characters in 10): {report['answer_nearly_in_context']:.1%}")
    print("with the default hybrid retrieval (lexical and the local model's vectors):")
    print(f"  answer in the retrieved context: {report['hybrid_answer_in_context']:.1%}")
    print(f"  answer nearly in it: {report['hybrid_answer_nearly_in_context']:.1%}")
    for miss in report["missed"]:  # type: ignore[attr-defined]
        print(f"  missed: {miss['id']} (in its page's text: {miss['in_page']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
