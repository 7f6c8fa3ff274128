"""Pages Doxygen made, read as Doxygen means them (tether.ingest.doxygen)."""

from __future__ import annotations

from pathlib import Path

from tether.ingest import load_path
from tether.ingest.doxygen import made_by_doxygen, source_references_dropped

HEAD = (
    '<!DOCTYPE html><html><head><meta http-equiv="Content-Type" content="text/xhtml"/>'
    '<meta name="generator" content="Doxygen 1.9.4"/><title>Lumen: lumen_timer.h File'
    " Reference</title></head><body>"
)
#: A header's page as Doxygen 1.9 writes it: graph captions, a link to the source
#: listing, a prototype table, a code example with hover cards, source references.
BODY = """<div class="header"><div class="headertitle"><div class="title">lumen_timer.h File
Reference</div></div></div>
<div class="contents">
<div class="textblock"><div id="dynsection-0" class="dynheader closed">
  <img src="closed.png" alt="+"/> Include dependency graph for lumen_timer.h:</div>
<div id="dynsection-0-content" class="dyncontent" style="display:none;">
<div class="center"><img src="incl.png" alt=""/></div></div></div>
<p><a href="timer_source.html">Go to the source code of this file.</a></p>
<table class="memberdecls"><tr class="memitem"><td class="memItemLeft">int&#160;</td>
<td class="memItemRight"><a class="el" href="#a1">lumen_wait</a> (int ms)</td></tr>
<tr class="memdesc"><td class="mdescLeft">&#160;</td><td class="mdescRight">Wait for a
while. <a href="#a1">More...</a></td></tr></table>
<h2 class="groupheader">Function Documentation</h2>
<h2 class="memtitle"><span class="permalink"><a href="#a1">&#9670;&nbsp;</a></span>lumen_wait()
</h2>
<div class="memitem"><div class="memproto"><table class="memname">
<tr><td class="memname">int lumen_wait</td><td>(</td><td class="paramtype">int&#160;</td>
<td class="paramname"><em>ms</em></td><td>)</td><td></td></tr></table></div>
<div class="memdoc"><p>Wait for a while.</p>
<p>Wake the hub first, for example:</p>
<div class="fragment"><div class="line"><a class="code" href="#a2">lumen_wake</a>();</div>
<div class="line"><span class="keywordflow">while</span> (busy) {</div>
<div class="line">    <a class="code" href="#a1">lumen_wait</a>(10);</div>
<div class="line">}</div>
<div class="ttc" id="a1"><div class="ttname"><a href="#a1">lumen_wait</a></div>
<div class="ttdeci">int lumen_wait(int ms)</div><div class="ttdef"><b>Definition:</b>
<a href="timer_source.html#l00042">lumen_timer.h:42</a></div></div>
</div><!-- fragment --><p>The hub sleeps meanwhile.</p>
<p class="definition">Definition at line <a class="el" href="s.html#l42">42</a> of file
<a class="el" href="s.html">lumen_timer.h</a>.</p>
</div></div>
<hr/>The documentation for this file was generated from the following file:<ul>
<li><a class="el" href="timer_source.html">lumen_timer.h</a></li></ul>
</div></body></html>"""


def test_a_doxygen_page_reads_as_doxygen_means_it(tmp_path: Path) -> None:
    """An example's lines stay one code block, without the hover cards of the names in it;
    a prototype is one line; the lines pointing into the source listings and the
    "More..." jump go."""
    path = tmp_path / "lumen_timer.html"
    path.write_text(HEAD + BODY, "utf-8")
    text = load_path(path).text
    assert text == (
        "lumen_timer.h File Reference\n\n"
        "int | lumen_wait (int ms)\n\n| Wait for a while.\n\n"  # (its first cell is empty)
        "## Function Documentation\n\n## lumen_wait()\n\n"
        "int lumen_wait ( int ms )\n\n"
        "Wait for a while.\n\nWake the hub first, for example:\n\n"
        "```\nlumen_wake();\nwhile (busy) {\n    lumen_wait(10);\n}\n```\n\n"
        "The hub sleeps meanwhile."
    )


def test_the_same_markup_without_doxygens_name_reads_as_plain_html(tmp_path: Path) -> None:
    """Only a page that names Doxygen its generator is read so: elsewhere a ``fragment``
    is a slide's step and a paragraph may begin "Definition"."""
    path = tmp_path / "other.html"
    path.write_text(HEAD.replace("Doxygen 1.9.4", "Other 1.0") + BODY, "utf-8")
    text = load_path(path).text
    assert "Definition at line 42 of file lumen_timer.h." in text
    assert "lumen_wake();\n\nwhile (busy) {" in text  # each line a paragraph
    assert "```" not in text


def test_made_by_doxygen_reads_the_generator_in_either_attribute_order() -> None:
    assert made_by_doxygen('<head><meta name="generator" content="Doxygen 1.8.17"/>')
    assert made_by_doxygen("<head><META CONTENT='doxygen 1.9' NAME='generator'>")
    assert not made_by_doxygen('<head><meta name="generator" content="Sphinx 5.3"/>')
    assert not made_by_doxygen("<p>Made with doxygen.</p>")


def test_source_references_and_the_file_list_after_them_are_dropped() -> None:
    lines = [
        "Definition in file SDL_timer.h.",
        "Returns the ticks.",
        "Collaboration diagram for SDL_AudioSpec:",
        "The documentation for this struct was generated from the following files:",
        "- SDL_audio.h",
        "- SDL_audio.c",
        "",
        "Definition of the timer ID type.",  # a sentence that begins so: content
    ]
    assert source_references_dropped(lines) == [
        "Returns the ticks.",
        "Definition of the timer ID type.",
    ]
