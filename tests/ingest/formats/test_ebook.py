"""EPUB books, built in the tests as real EPUB 3 (and EPUB 2) zip files: chapters in
reading order, titled by their heading or the table of contents, hostile books refused
(a zip bomb, entities in the package XML); and a book and a JSON file searched end to end
through :class:`tether.Tether`."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from helpers import make_settings
from tether import EmptyDocument, Tether, UnreadableFile
from tether.ingest import LoadedDocument, load_path, normalize_text
from tether.ingest.formats import format_of, load_file
from tether.ingest.loaders import FileBytes

CONTAINER = """<?xml version="1.0" encoding="UTF-8"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles>
    <rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>
  </rootfiles>
</container>
"""


def xhtml(body: str, title: str = "page") -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">'
        f"<head><title>{title}</title></head><body>{body}</body></html>"
    )


CHAPTERS = {
    "cover": xhtml('<div><img src="cover.jpg" alt=""/></div>'),
    "chapter1": xhtml(
        "<h1>The Lamp Room</h1><p>Trim the kerosene wicks before dusk.</p>"
        "<h2>Polishing</h2><p>Polish the Fresnel lens with a soft cloth.</p>"
    ),
    "chapter2": xhtml("<p>The supply boat comes every second Tuesday.</p>"),
    "notes": xhtml("<p>An endnote read only from a link.</p>"),
}
NAV = xhtml(
    '<nav epub:type="toc"><ol>'
    '<li><a href="chapter1.xhtml">1. The Lamp Room</a></li>'
    '<li><a href="text/../chapter2.xhtml#start">Harbour Days</a></li>'
    '</ol></nav><nav epub:type="landmarks"><a href="cover.xhtml">Cover</a></nav>'
)
NCX = """<?xml version="1.0" encoding="UTF-8"?>
<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1"><navMap>
  <navPoint id="p1"><navLabel><text>Harbour Days</text></navLabel>
    <content src="chapter2.xhtml"/></navPoint>
</navMap></ncx>
"""


def package(spine: str, *, nav: bool) -> str:
    """The OPF: the manifest lists chapter 2 before chapter 1; the spine reads 1 first."""
    toc = (
        '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
        if nav
        else '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>'
    )
    items = "".join(
        f'<item id="{name}" href="{name}.xhtml" media-type="application/xhtml+xml"/>'
        for name in ("chapter2", "cover", "chapter1", "notes")
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:identifier id="id">urn:uuid:1</dc:identifier>
    <dc:title>The Lighthouse Keeper</dc:title>
    <dc:language>en</dc:language>
  </metadata>
  <manifest>{toc}{items}</manifest>
  <spine{"" if nav else ' toc="ncx"'}>{spine}</spine>
</package>
"""


SPINE = (
    '<itemref idref="cover"/><itemref idref="nav"/><itemref idref="chapter1"/>'
    '<itemref idref="notes" linear="no"/><itemref idref="chapter2"/>'
)


def make_epub(path: Path, members: dict[str, str] | None = None, *, nav: bool = True) -> Path:
    """A real EPUB: ``mimetype`` stored first, then the container, package and chapters;
    ``members`` replaces or adds members."""
    files = {
        "META-INF/container.xml": CONTAINER,
        "OEBPS/content.opf": package(SPINE, nav=nav),
        "OEBPS/nav.xhtml" if nav else "OEBPS/toc.ncx": NAV if nav else NCX,
        **{f"OEBPS/{name}.xhtml": markup for name, markup in CHAPTERS.items()},
        **(members or {}),
    }
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        for name, content in files.items():
            archive.writestr(name, content, compress_type=zipfile.ZIP_DEFLATED)
    return path


def titled(doc: LoadedDocument) -> list[tuple[str | None, str]]:
    """Each section's title and text; the text is normalized and the sections cover it
    in order."""
    assert normalize_text(doc.text) == doc.text
    assert all(a.end <= b.start for a, b in zip(doc.sections, doc.sections[1:], strict=False))
    return [(s.title, doc.text[s.start : s.end].strip()) for s in doc.sections]


def test_chapters_are_sections_in_reading_order_titled_by_heading_or_contents(
    tmp_path: Path,
) -> None:
    doc = load_path(make_epub(tmp_path / "keeper.epub"))
    assert doc.title == "The Lighthouse Keeper" and doc.mime == "application/epub+zip"
    assert titled(doc) == [
        ("The Lamp Room", "# The Lamp Room\n\nTrim the kerosene wicks before dusk."),
        ("The Lamp Room > Polishing", "## Polishing\n\nPolish the Fresnel lens with a soft cloth."),
        ("Harbour Days", "The supply boat comes every second Tuesday."),
    ]
    assert "endnote" not in doc.text  # linear="no"
    assert "Cover" not in doc.text and "1. The Lamp Room" not in doc.text  # nav: no chapter


def test_an_epub2_ncx_titles_a_chapter_without_a_heading(tmp_path: Path) -> None:
    doc = load_path(make_epub(tmp_path / "keeper.epub", nav=False))
    assert [s.title for s in doc.sections] == [
        "The Lamp Room",
        "The Lamp Room > Polishing",
        "Harbour Days",
    ]


def test_a_chapter_with_no_heading_nor_contents_entry_is_chapter_n(tmp_path: Path) -> None:
    book = make_epub(tmp_path / "keeper.epub", {"OEBPS/nav.xhtml": xhtml("<nav></nav>")})
    assert [s.title for s in load_path(book).sections][-1] == "Chapter 2"


def test_an_extensionless_epub_is_known_by_its_content(tmp_path: Path) -> None:
    data = make_epub(tmp_path / "keeper.epub").read_bytes()
    assert format_of("download", data).name == "EPUB"
    assert load_file(FileBytes(tmp_path / "download", data)).title == "The Lighthouse Keeper"


def test_a_book_of_only_a_cover_is_an_empty_document(tmp_path: Path) -> None:
    only_cover = package('<itemref idref="cover"/>', nav=True)
    with pytest.raises(EmptyDocument):
        load_path(make_epub(tmp_path / "cover.epub", {"OEBPS/content.opf": only_cover}))


LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE container [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">]>
<container>&d;</container>
"""


@pytest.mark.parametrize(
    ("members", "match"),
    [
        ({"META-INF/container.xml": LAUGHS}, "declares entities"),
        ({"OEBPS/content.opf": "<package><manifest>"}, "damaged XML"),
        ({"META-INF/container.xml": "<container/>"}, "names no package"),
    ],
    ids=["entities", "damaged-package", "no-rootfile"],
)
def test_hostile_or_damaged_package_xml_is_unreadable(
    tmp_path: Path, members: dict[str, str], match: str
) -> None:
    with pytest.raises(UnreadableFile, match=match):
        load_path(make_epub(tmp_path / "bad.epub", members))


def test_a_file_that_is_no_zip_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / "fake.epub").write_bytes(b"not a zip file at all")
    with pytest.raises(UnreadableFile, match="zip"):
        load_path(tmp_path / "fake.epub")


def test_a_zip_bomb_chapter_is_refused_before_it_is_unpacked(tmp_path: Path) -> None:
    """A member declaring 600 MB of zeros (written in 1 MB pieces: the test stays small)."""
    book = make_epub(tmp_path / "bomb.epub")
    zeros = bytes(2**20)
    with (
        zipfile.ZipFile(book, "a", zipfile.ZIP_DEFLATED, compresslevel=1) as archive,
        archive.open("OEBPS/big.xhtml", "w", force_zip64=True) as member,
    ):
        for _ in range(600):
            member.write(zeros)
    assert book.stat().st_size < 10 * 2**20
    with pytest.raises(UnreadableFile, match="zip bomb"):
        load_path(book)


def test_search_finds_a_books_chapter_and_a_json_record(tmp_path: Path) -> None:
    book = make_epub(tmp_path / "keeper.epub")
    config = tmp_path / "stations.json"
    config.write_text('{"north": {"keeper": "Ana", "lamp": "argand burner"}, "south": {}}')
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        results = t.add([book, config])
        assert [r.status for r in results] == ["indexed", "indexed"]
        [hit, *_] = t.search("supply boat Tuesday", scope="global")
        assert hit.section_title == "Harbour Days" and "supply boat" in hit.text
        [hit, *_] = t.search("Fresnel lens", scope="global")
        assert hit.section_title == "The Lamp Room > Polishing"
        [hit, *_] = t.search("argand burner", scope="global")
        assert hit.section_title == "north" and "north.lamp: argand burner" in hit.text
