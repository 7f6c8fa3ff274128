"""Seconds per scanned page, and words read right, for tether's OCR against RapidOCR's own.

    .venv/bin/python bench/ocr_speed.py                # 3 pages at 150 dpi, 3 at 300 dpi
    .venv/bin/python bench/ocr_speed.py --pages 1

Makes A4 pages of 40 lines of 10 pt text with Pillow (DejaVu Sans), turned by one degree,
specked with noise and saved as JPEG (quality 75), as a scanner writes them into a PDF;
then reads each page twice, after a warm-up page:

- tether: ``tether.ingest.ocr_engine.ocr_image`` (lines found on a copy at most 2000 px
  long, each line cut from the full page 48 px high and read alone);
- peer: RapidOCR's own call, ``RapidOCR()(page)``, its lines joined top to bottom.

It prints, per resolution and reader, the median seconds per page and the share of the
page's words found in its text (a word run into its neighbour, "thecoolant", is lost).
Times depend on the machine and its load: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import statistics
import time
from collections import Counter
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont
from rapidocr_onnxruntime import RapidOCR

from tether.ingest.ocr_engine import ocr_image

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
WORDS = (
    "pump valve seat bolt torque filter battery hose crack spring water tank gasket depot "
    "serial plate coolant glycol bronze impeller cellar degrees hours replace inspect store "
    "order quote warranty the of and every with from each before first only above"
).split()


def scanned_page(dpi: int, seed: int) -> tuple[Image.Image, list[str]]:
    """An A4 page of 40 lines of 10 pt text at ``dpi``, as a JPEG scan, and its words."""
    rng = random.Random(seed)
    lines = [" ".join(rng.choice(WORDS) for _ in range(9)) for _ in range(40)]
    size = round(10 * dpi / 72)
    font = ImageFont.truetype(FONT, size) if Path(FONT).exists() else ImageFont.load_default(size)
    page = Image.new("L", (round(8.27 * dpi), round(11.69 * dpi)), 255)
    draw = ImageDraw.Draw(page)
    for number, line in enumerate(lines):
        draw.text((dpi, dpi + number * round(size * 1.6)), line, font=font, fill=0)
    page = page.rotate(1, resample=Image.Resampling.BICUBIC, fillcolor=255)
    pixels = page.load()
    for _ in range(page.width * page.height // 500):
        pixels[rng.randrange(page.width), rng.randrange(page.height)] = rng.randrange(256)
    buffer = io.BytesIO()
    page.convert("RGB").save(buffer, "JPEG", quality=75)
    return Image.open(buffer), " ".join(lines).split()


def words_found(text: str, words: list[str]) -> float:
    return sum((Counter(text.split()) & Counter(words)).values()) / len(words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=3, help="pages per resolution")
    args = parser.parse_args()
    peer = RapidOCR()
    readers = {
        "tether": lambda page: ocr_image(page, "bench.pdf", 1, timeout=600),
        "peer": lambda page: "\n".join(line[1] for line in peer(page)[0] or []),
    }
    ocr_image(scanned_page(150, 99)[0], "warm-up.pdf", 1, timeout=600)  # (loads the engine)
    peer(scanned_page(150, 99)[0])
    for dpi in (150, 300):
        pages = [scanned_page(dpi, seed) for seed in range(args.pages)]
        for name, read in readers.items():
            seconds, found = [], []
            for page, words in pages:
                started = time.perf_counter()
                text = read(page)
                seconds.append(time.perf_counter() - started)
                found.append(words_found(text, words))
            print(
                f"{dpi} dpi, {name:6}: {statistics.median(seconds):5.2f} s/page (median of"
                f" {len(pages)}), words read {statistics.mean(found):6.1%},"
                f" load average {os.getloadavg()[0]:.1f}"
            )


if __name__ == "__main__":
    main()
