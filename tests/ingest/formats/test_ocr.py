"""Scanned pages read by OCR: images (PNG, JPEG, multi-page TIFF) and PDFs without a text
layer, through both real engines (Debian's tesseract program and RapidOCR) and a real store.

Every scan is made in the test: text rendered with Pillow on a white page, turned by one
degree and sprinkled with noise, saved as the scanner would (a JPEG inside the PDF).
"""

from __future__ import annotations

import io
import random
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from PIL import Image, ImageDraw, ImageFont

from helpers import make_settings
from tether import EmptyDocument, InvalidArgument, Tether, UnreadableFile, UnsupportedFileType
from tether.ingest import ocr_engine, tesseract
from tether.ingest.formats import load_path
from tether.ingest.formats.ocr import load_image
from tether.ingest.loaders import FileBytes
from tether.ingest.ocr_engine import OcrOptions, _with_spaces, mended_ligatures, reading_order
from tether.text import packaged_vocabulary

pytest.importorskip("rapidocr_onnxruntime", reason="the ocr extra installs RapidOCR")

NO_TESSERACT = "no tesseract: make test installs Debian's (scripts/install-debian-packages.sh)"
needs_tesseract = pytest.mark.skipif(not tesseract.usable(), reason=NO_TESSERACT)

FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")

#: The scanned pages: (file, page) -> lines. Each question's answer is on one page only.
PAGES = {
    ("pump.png", 1): [
        "Coolant pump",
        "Prime the coolant pump with glycol before the first start.",
        "The pump impeller is made of bronze.",
    ],
    ("valve.jpg", 1): [
        "Valve maintenance",
        "Torque the valve seat bolts to 45 newton metres.",
        "Lap the valve faces with fine carborundum paste.",
    ],
    ("manual.tiff", 1): [
        "Air filter",
        "Replace the air filter cartridge every 300 operating hours.",
    ],
    ("manual.tiff", 2): [
        "Battery storage",
        "Store the spare battery in a dry cellar above five degrees.",
    ],
    ("scan.pdf", 1): [
        "Hydraulic hoses",
        "Inspect each hydraulic hose for cracks every spring.",
    ],
    ("scan.pdf", 2): [
        "Humidifier",
        "Fill the humidifier tank with distilled water only.",
    ],
    ("scan.pdf", 3): [
        "Spare parts",
        "Order spare gaskets from the depot in Rotterdam.",
        "Warranty claims quote the serial number from the rear plate.",
    ],
}

#: (question, the snippet that answers it, the file and page it is on).
QUESTIONS = [
    ("What must the coolant pump be primed with?", "glycol", ("pump.png", 1)),
    ("What is the pump impeller made of?", "bronze", ("pump.png", 1)),
    ("How tight are the valve seat bolts torqued?", "45 newton metres", ("valve.jpg", 1)),
    ("What paste laps the valve faces?", "carborundum paste", ("valve.jpg", 1)),
    ("How often is the air filter cartridge replaced?", "300 operating hours", ("manual.tiff", 1)),
    ("Where is the spare battery stored?", "dry cellar", ("manual.tiff", 2)),
    ("When is each hydraulic hose inspected for cracks?", "every spring", ("scan.pdf", 1)),
    ("What water fills the humidifier tank?", "distilled water", ("scan.pdf", 2)),
    ("Where are spare gaskets ordered from?", "Rotterdam", ("scan.pdf", 3)),
    ("Which number do warranty claims quote?", "serial number", ("scan.pdf", 3)),
]


def font(size: int = 28) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    if FONT.exists():
        return ImageFont.truetype(str(FONT), size)
    return ImageFont.load_default(size=size)


def scanned_page(lines: list[str], seed: int = 0) -> Image.Image:
    """A half A4 page at 150 dpi with ``lines`` on it, as a scanner gives it back: turned
    by one degree, with specks of noise."""
    page = Image.new("L", (1240, 877), 255)
    draw = ImageDraw.Draw(page)
    for number, line in enumerate(lines):
        draw.text((100, 90 + 56 * number), line, font=font(), fill=0)
    page = page.rotate(1, resample=Image.Resampling.BICUBIC, fillcolor=255)
    rng = random.Random(seed)
    pixels = page.load()
    for _ in range(2500):
        pixels[rng.randrange(page.width), rng.randrange(page.height)] = rng.randrange(256)
    return page


def page_images(name: str) -> list[Image.Image]:
    numbers = sorted(page for file, page in PAGES if file == name)
    return [scanned_page(PAGES[name, n], seed=n) for n in numbers]


def write_scans(folder: Path) -> list[Path]:
    """The scanned files of :data:`PAGES`: a PNG, a JPEG, a 2-page TIFF, a 3-page PDF."""
    png, jpeg, tiff, pdf = (
        folder / n for n in ("pump.png", "valve.jpg", "manual.tiff", "scan.pdf")
    )
    page_images("pump.png")[0].save(png)
    page_images("valve.jpg")[0].convert("RGB").save(jpeg, quality=80)
    first, *rest = page_images("manual.tiff")
    first.save(tiff, save_all=True, append_images=rest, compression="tiff_lzw")
    write_scanned_pdf(pdf, page_images("scan.pdf"))
    return [png, jpeg, tiff, pdf]


def write_scanned_pdf(path: Path, pages: list[Image.Image]) -> Path:
    """An image-only PDF, one scan per page (as a JPEG, as scanners write them)."""
    first, *rest = [page.convert("RGB") for page in pages]
    first.save(path, "PDF", resolution=150, save_all=True, append_images=rest)
    return path


@pytest.fixture(scope="module")
def scans(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_scans(tmp_path_factory.mktemp("scans"))


@pytest.fixture(scope="module", params=["tesseract", "rapidocr"])
def library(
    request: pytest.FixtureRequest, scans: list[Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tether]:
    """A store with every scan added by one engine (one loader process). Made before the
    autouse fixture turns embeddings off, so it says so itself."""
    if request.param == "tesseract" and not tesseract.usable():
        pytest.skip(NO_TESSERACT)
    db = tmp_path_factory.mktemp("db") / "t.db"
    settings = make_settings(
        convert_workers=1, embeddings={"enabled": False}, ocr_engine=request.param
    )
    with Tether(db=db, settings=settings) as t:
        results = t.add(scans)
        assert [r.status for r in results] == ["indexed"] * len(scans)
        yield t


# -- the scans, read ------------------------------------------------------------------------


def test_questions_find_their_answers_on_the_scanned_pages(library: Tether) -> None:
    found = [snippet for q, snippet, _ in QUESTIONS if snippet in library.retrieve(q).context]
    rate = len(found) / len(QUESTIONS)
    print(f"OCR question hit rate: {len(found)}/{len(QUESTIONS)}")
    assert rate >= 0.9, f"answers found for {found}"


@pytest.mark.parametrize(("question", "snippet", "where"), QUESTIONS[::2])
def test_a_hit_cites_the_scanned_page(
    library: Tether, question: str, snippet: str, where: tuple[str, int]
) -> None:
    hits = [hit for hit in library.search(question, scope="global") if snippet in hit.text]
    assert hits
    assert {(Path(hit.source_path or "").name, hit.page) for hit in hits} == {where}


def test_each_image_type_has_its_own_mime_type_and_pages(library: Tether) -> None:
    documents = {Path(d.source_path or "").name: d for d in library.documents()}
    mimes = {name: documents[name].mime for name in documents}
    assert mimes == {
        "pump.png": "image/png",
        "valve.jpg": "image/jpeg",
        "manual.tiff": "image/tiff",
        "scan.pdf": "application/pdf",
    }
    assert documents["manual.tiff"].title == "manual"
    assert documents["scan.pdf"].metadata["ocr_pages"] == 3
    assert documents["manual.tiff"].metadata["ocr_pages"] == 2
    pages = {c.page for c in library.chunks(documents["manual.tiff"].id)}
    assert pages == {1, 2}


def test_lines_come_out_in_reading_order(scans: list[Path]) -> None:
    doc = load_path(scans[0])
    assert doc.text.split("\n") == PAGES["pump.png", 1]
    assert [(s.start, s.end, s.page) for s in doc.sections] == [(0, len(doc.text), 1)]


def test_reading_order_joins_boxes_of_one_line_left_to_right() -> None:
    def box(left: float, top: float, right: float, bottom: float) -> list[list[float]]:
        return [[left, top], [right, top], [right, bottom], [left, bottom]]

    results = [
        [box(600, 102, 900, 134), "Date: 2024", 0.9],  # the right half of line 1, a bit lower
        [box(100, 200, 500, 232), "second line", 0.95],
        [box(100, 100, 400, 132), "Name: Alice", 0.99],
        [box(100, 300, 500, 332), "smudge", 0.2],  # below the confidence kept
    ]
    assert reading_order(results) == ["Name: Alice Date: 2024", "second line"]


def test_words_that_lost_a_ligature_are_mended_from_the_vocabulary() -> None:
    """Print sets "fi", "fl", "ffi" and "ffl" as one glyph, which the recogniser reads as
    "f" in scanned manuals ("fags" for "flags"); a word the vocabulary lacks and knows
    with the ligature's letters back is mended, nothing else is."""
    vocabulary = packaged_vocabulary()
    assert vocabulary, "the local model's package holds the vocabulary"
    read = "when fags are zero; Fle names; an efcient ofce; IDN2_NFC fags."
    assert mended_ligatures(read, vocabulary) == (
        "when flags are zero; File names; an efficient office; IDN2_NFC flags."
    )
    kept = "flags, file and offer; FGS FAGS; fn fs cfg buf; zzfq; the cafe"
    assert mended_ligatures(kept, vocabulary) == kept
    assert mended_ligatures(read, frozenset()) == read


def _line(marks: list[tuple[int, bool]], width: int = 400) -> Image.Image:
    """A line image 48 px high with a mark 10 px wide centred at each x: a letter's full
    height, or (False) a full stop's dot on the baseline only."""
    line = Image.new("RGB", (width, 48), "white")
    draw = ImageDraw.Draw(line)
    for x, tall in marks:
        draw.rectangle((x - 5, 10 if tall else 40, x + 5, 44), fill="black")
    return line


def _frames(columns: list[int], text: str) -> tuple[int, list[list[str]], list[list[int]]]:
    return (100, [list(text)], [columns])  # 100 model columns on 400 px: 4 px a column


def test_no_space_is_put_before_a_full_stop_whose_dot_reads_as_a_gap() -> None:
    """A full stop's dot sits below the band a word space is looked for in, so the blank
    around it reads as one wide gap: a space went before it ("idn2 .h")."""
    marks = [(42, True), (58, True), (74, True), (90, True), (130, False), (154, True)]
    columns = [10, 14, 18, 22, 32, 38]  # (the dot read right of the gap's middle)
    assert _with_spaces(_line(marks), "idn2.h", _frames(columns, "idn2.h")) == "idn2.h"
    # The same gap before a letter is a word space.
    assert _with_spaces(_line(marks), "idn2xh", _frames(columns, "idn2xh")) == "idn2 xh"


def test_digits_are_apart_only_at_twice_a_word_space() -> None:
    """Digits are set on one width: the blank around a narrow "1" is no word space."""
    letters = [(30, True), (46, True), (82, True), (98, True), (114, True), (130, True)]
    text, columns = "abcard16", [7, 11, 20, 24, 28, 32, 36]
    near = _line([*letters, (146, True), (178, True)])  # 1 and 6: a word space apart
    assert _with_spaces(near, text, _frames([*columns, 44], text)) == "ab card16"
    far = _line([*letters, (146, True), (222, True)])  # ... and over twice one
    assert _with_spaces(far, text, _frames([*columns, 55], text)) == "ab card1 6"


# -- off, too large, too slow ---------------------------------------------------------------


def test_with_ocr_off_an_image_fails_typed_and_a_scan_says_to_turn_it_on(
    scans: list[Path], tmp_path: Path
) -> None:
    with Tether(db=tmp_path / "t.db", settings=make_settings(ocr=False)) as t:
        image, pdf = t.add([scans[0], scans[3]], on_error="collect")
    assert isinstance(image.error, UnsupportedFileType)
    assert "rag.ocr = true" in str(image.error)
    assert isinstance(pdf.error, EmptyDocument)
    assert "OCR is off: set rag.ocr = true" in str(pdf.error)


@pytest.mark.parametrize("size", [(30000, 30000), (9000, 7000)])
def test_a_decompression_bomb_fails_typed_and_fast(tmp_path: Path, size: tuple[int, int]) -> None:
    """900 megapixels (past Pillow's own bound) and 63 (past tether's, 60) in a few kB."""
    bomb = tmp_path / "bomb.png"
    Image.new("1", size, 1).save(bomb, optimize=True)
    assert bomb.stat().st_size < 1_000_000
    started = time.monotonic()
    with pytest.raises(UnreadableFile, match="decompression bomb"):
        load_image(FileBytes(bomb, bomb.read_bytes()))
    assert time.monotonic() - started < 2.0


def test_an_image_that_is_not_one_fails_typed(tmp_path: Path) -> None:
    fake = FileBytes(tmp_path / "photo.jpg", b"\xff\xd8\xff" + b"not a JPEG" * 10)
    with pytest.raises(UnreadableFile, match="not a readable image"):
        load_image(fake)


def test_a_blank_scan_is_an_empty_document(tmp_path: Path) -> None:
    blank = tmp_path / "blank.png"
    scanned_page([]).save(blank)
    with pytest.raises(EmptyDocument, match="OCR read no text"):
        load_image(FileBytes(blank, blank.read_bytes()))


def test_a_page_over_the_ocr_timeout_is_left_out_with_a_warning(tmp_path: Path) -> None:
    """A PDF whose first page has a text layer and whose second is a scan: with a page
    timeout no OCR can meet, the scan is left out and said so; the text page stays."""
    from fpdf import FPDF

    scan = tmp_path / "scan.png"
    scanned_page(PAGES["scan.pdf", 1]).convert("RGB").save(scan)
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.multi_cell(0, 6, "The preface explains how the maintenance log is kept. " * 3)
    pdf.add_page()
    pdf.image(str(scan), x=0, y=0, w=210)
    pdf.output(str(tmp_path / "mixed.pdf"))
    settings = make_settings(ocr_page_timeout=0.001)
    with Tether(db=tmp_path / "t.db", settings=settings) as t:
        [result] = t.add(tmp_path / "mixed.pdf")
        [document] = t.documents()
        assert {c.page for c in t.chunks(result.document_id)} == {1}
    [warning] = document.metadata["warnings"]
    assert warning.startswith("page 2: OCR took longer than 0.001 s (rag.ocr_page_timeout)")
    assert "ocr_pages" not in document.metadata


def test_a_long_scan_is_read_to_its_end_past_the_file_timeout(tmp_path: Path) -> None:
    """Each page read by OCR adds its own time (rag.ocr_page_timeout) to the file's
    (rag.file_timeout): a scanned book longer than the file timeout is read whole, as
    six pages are here in a one-second file timeout."""
    lines = [
        [f"Chapter {n}", f"The torque of bolt {n} is {10 * n} newton metres."] for n in range(1, 7)
    ]
    pages = [scanned_page(page, seed=n) for n, page in enumerate(lines)]
    pdf = write_scanned_pdf(tmp_path / "book.pdf", pages)
    settings = make_settings(file_timeout=1.0, ocr_page_timeout=30.0)
    started = time.monotonic()
    with Tether(db=tmp_path / "t.db", settings=settings) as t:
        [result] = t.add(pdf)
        assert result.status == "indexed", result.error
        [document] = t.documents()
        assert document.metadata["ocr_pages"] == 6
        assert {c.page for c in t.chunks(result.document_id)} == set(range(1, 7))
        assert "60 newton" in " ".join(c.content for c in t.chunks(result.document_id))
    assert time.monotonic() - started > 1.0  # the file did take longer than its timeout


def test_pages_of_a_tiff_are_numbered_from_one(tmp_path: Path) -> None:
    path = tmp_path / "two.tif"
    first, second = (scanned_page([f"Page {word} of the ledger"]) for word in ("alpha", "beta"))
    first.save(path, save_all=True, append_images=[second])
    doc = load_image(FileBytes(path, path.read_bytes()))
    pages = {doc.text[s.start : s.end]: s.page for s in doc.sections}
    assert pages == {"Page alpha of the ledger": 1, "Page beta of the ledger": 2}
    assert doc.mime == "image/tiff"


def test_a_page_scanned_upside_down_is_read(tmp_path: Path) -> None:
    path = tmp_path / "turned.png"
    scanned_page(PAGES["scan.pdf", 3] + ["Keep the receipts for ten years."]).rotate(180).save(path)
    doc = load_image(FileBytes(path, path.read_bytes()))
    assert "Order spare gaskets from the depot in Rotterdam." in doc.text.split("\n")


def test_a_large_scan_is_read(tmp_path: Path) -> None:
    """An A4 page at 300 dpi (3508 px long): text is looked for on a smaller copy, each
    line read from the full page."""
    page = Image.new("L", (2480, 3508), 255)
    ImageDraw.Draw(page).text((300, 400), "Ledger of the north mill", font=font(56), fill=0)
    buffer = io.BytesIO()
    page.save(buffer, "PNG")
    doc = load_image(FileBytes(tmp_path / "a4.png", buffer.getvalue()))
    assert doc.text == "Ledger of the north mill"


# -- the engines ----------------------------------------------------------------------------


@pytest.fixture
def options() -> Iterator[None]:
    """This process's OCR options, put back after the test."""
    before = ocr_engine.current_options()
    yield
    ocr_engine.configure(before)


def test_tesseract_tsv_becomes_lines_with_their_confidence() -> None:
    names = "level page_num block_num par_num line_num word_num left top width height conf text"
    header = names.replace(" ", "\t")

    def word(line: int, number: int, text: str, confidence: float) -> str:
        return f"5\t1\t1\t1\t{line}\t{number}\t0\t0\t9\t9\t{confidence}\t{text}"

    tsv = "\n".join(
        [
            header,
            "4\t1\t1\t1\t1\t0\t0\t0\t99\t9\t-1\t",  # a line's own row: no word
            word(1, 1, "Torque", 96.5),
            word(1, 2, "bolts", 91.0),
            word(2, 1, "~", 12.0),  # a speck read as a tilde
            word(2, 2, "twice", 88.0),
            word(2, 3, " ", 95.0),  # a blank word
        ]
    )
    lines = tesseract.lines_of(tsv)
    assert [text for text, _ in lines] == ["Torque bolts", "~ twice"]
    assert lines[0][1] == pytest.approx(0.9375)
    assert lines[1][1] == pytest.approx(0.5)


@needs_tesseract
def test_auto_prefers_tesseract_and_each_engine_can_be_named(options: None) -> None:
    for engine, expected in (
        ("auto", "tesseract"),
        ("tesseract", "tesseract"),
        ("rapidocr", "rapidocr"),
    ):
        ocr_engine.configure(OcrOptions(engine=engine))
        assert ocr_engine.engine_name("scan.png") == expected


def test_without_tesseract_auto_reads_with_rapidocr_and_naming_it_fails_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: None
) -> None:
    monkeypatch.setenv("TETHER_TESSERACT", str(tmp_path / "no-such-program"))
    path = tmp_path / "pump.png"
    scanned_page(PAGES["pump.png", 1]).save(path)
    ocr_engine.configure(OcrOptions(engine="auto"))
    assert ocr_engine.engine_name(str(path)) == "rapidocr"
    assert "bronze" in load_image(FileBytes(path, path.read_bytes())).text
    ocr_engine.configure(OcrOptions(engine="tesseract"))
    with pytest.raises(UnsupportedFileType, match="apt-get install tesseract-ocr"):
        load_image(FileBytes(path, path.read_bytes()))


GERMAN_LINES = [
    "Die Größe der Pumpe hängt vom Durchfluss ab.",
    "Schließen Sie das Ventil vor der Wartung.",
    "Die Stadt München prüft die Anlage jährlich.",
]


def _has_model(model: str) -> bool:
    binary = tesseract.program()
    return binary is not None and model in tesseract.installed_models(binary)


@pytest.mark.skipif(
    not _has_model("deu"),
    reason="Tesseract's German model is not installed (scripts/install-debian-packages.sh"
    " installs tesseract-ocr-deu)",
)
def test_a_german_scan_is_read_with_the_german_model(tmp_path: Path, options: None) -> None:
    """rag.language = "german" reads a scan with Tesseract's deu model: umlauts and ß as
    printed, where the English model reads "Gré®e", "SchlieBen" and "Munchen"."""
    path = tmp_path / "pumpe.png"
    scanned_page(GERMAN_LINES).save(path)
    ocr_engine.configure(OcrOptions(engine="tesseract", language="german"))
    assert load_image(FileBytes(path, path.read_bytes())).text.split("\n")[:3] == GERMAN_LINES
    ocr_engine.configure(OcrOptions(engine="tesseract", language="english"))
    english = load_image(FileBytes(path, path.read_bytes())).text
    assert "Größe" not in english and "München" not in english


@needs_tesseract
def test_a_language_without_a_tesseract_model_is_read_as_english(
    tmp_path: Path, options: None, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tesseract is pointed at a model folder without the German model (TESSDATA_PREFIX):
    a German store's scan is read as English, and a warning says what to install."""
    binary = tesseract.program()
    assert binary is not None
    listing = subprocess.run([binary, "--list-langs"], capture_output=True, text=True).stdout
    installed = Path(listing.splitlines()[0].split('"')[1])
    models = tmp_path / "tessdata"
    models.mkdir()
    for entry in installed.iterdir():  # its configurations and every model but German's
        if entry.name != "deu.traineddata":
            (models / entry.name).symlink_to(entry)
    monkeypatch.setenv("TESSDATA_PREFIX", str(models))
    tesseract.installed_models.cache_clear()
    tesseract._warn_missing_model.cache_clear()
    try:
        path = tmp_path / "valve.png"
        scanned_page(PAGES["valve.jpg", 1]).save(path)
        ocr_engine.configure(OcrOptions(engine="tesseract", language="german"))
        with caplog.at_level("WARNING", logger="tether.ingest"):
            doc = load_image(FileBytes(path, path.read_bytes()))
    finally:
        tesseract.installed_models.cache_clear()
        tesseract._warn_missing_model.cache_clear()
    assert "Lap the valve faces with fine carborundum paste." in doc.text.split("\n")
    assert "no 'deu' model" in caplog.text and "install tesseract-ocr-deu" in caplog.text


def test_an_unknown_engine_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="engine must be one of auto, tesseract, rapidocr"):
        OcrOptions(engine="abbyy")


@needs_tesseract
def test_text_a_few_pixels_high_is_read_from_the_image_enlarged(options: None) -> None:
    """A screenshot-sized picture in a typewriter font whose words are 8 pixels high (as
    in an e-mailed image): read as it is, Tesseract loses characters; enlarged to words
    of tesseract.TEXT_HEIGHT pixels, it reads every line."""
    lines = [
        "Torque the valve seat bolts to 45 newton metres.",
        "Order spare gaskets from the depot in Rotterdam.",
    ]
    if not FONT.with_name("DejaVuSansMono.ttf").exists():
        pytest.skip("needs Debian's fonts-dejavu-core (DejaVu Sans Mono)")
    mono = ImageFont.truetype(str(FONT.with_name("DejaVuSansMono.ttf")), 9)
    page = Image.new("L", (400, 50), 255)
    draw = ImageDraw.Draw(page)
    for number, line in enumerate(lines):
        draw.text((4, 4 + 16 * number), line, font=mono, fill=0)
    binary = tesseract.program()
    assert binary is not None
    as_is, height = tesseract._read(binary, page, "english", 30)
    assert height < tesseract.SMALL_TEXT
    assert [text for text, _ in as_is] != lines
    assert [text for text, _ in tesseract.read_page(page, "english", 30)] == lines


@needs_tesseract
def test_a_second_reading_never_takes_the_page_past_its_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The readings again (enlarged, upside down) share the page's time: when it has run
    out, the first reading stands and no process is started past it."""
    page = scanned_page(PAGES["pump.png", 1]).rotate(180)  # upside down: read again
    first = tesseract._read
    clock = [0.0]
    calls: list[float] = []

    def timed(binary: str, image: Image.Image, language: str, seconds: float) -> object:
        calls.append(seconds)
        done = first(binary, image, language, seconds)
        clock[0] += 31.0  # the first reading used up the page's 30 s
        return done

    monkeypatch.setattr(tesseract, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    monkeypatch.setattr(tesseract, "_read", timed)
    lines = tesseract.read_page(page, "english", 30.0)
    assert calls == [30.0]
    assert lines  # the first (upside-down, unconfident) reading stands
    assert tesseract._confidence(lines) < tesseract.TURN_BELOW
