"""Subtitles and transcripts (WebVTT, SubRip): the speech by turns and by time."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import make_settings
from tether import PathSource, Tether
from tether.errors import UnreadableFile
from tether.ingest.formats import load_path, sniff

MEETING = """WEBVTT - Weekly lamp meeting

STYLE
::cue { color: yellow }

NOTE recorded on the lighthouse's own system

1
00:00:01.000 --> 00:00:04.000
<v Ana>Welcome to the <b>lamp</b> meeting.

00:00:04.500 --> 00:00:07.000 align:start
<v Ana>We trim the wick at dusk &amp; dawn.

00:00:08.000 --> 00:00:09.000
<v.loud Ben>Agreed.

00:04:59.000 --> 00:05:02.000
<v Ben>One more thing:

00:05:02.000 --> 00:05:04.000
<v Ben>the oil order is due on Friday.

00:05:04.000 --> 00:05:06.000
<v Ben>the oil order is due on Friday.
"""

CAPTIONS = """1
00:00:01,000 --> 00:00:03,000
<i>ANA: The beam turns</i>
every ten seconds.

2
00:00:03,500 --> 00:00:05,000
{\\an8}<font color="#ff0">[Ben] Since 1998?</font>
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_meeting_transcript_reads_as_turns_in_five_minute_sections(tmp_path: Path) -> None:
    doc = load_path(write(tmp_path / "meeting.vtt", MEETING))
    assert doc.title == "Weekly lamp meeting" and doc.mime == "text/vtt"
    assert doc.text.split("\n\n") == [
        "00:00:00",
        "Ana: Welcome to the lamp meeting. We trim the wick at dusk & dawn.",
        "Ben: Agreed. One more thing:",
        "00:05:00",
        # (a new section opens a new paragraph; a caption repeated is kept once)
        "Ben: the oil order is due on Friday.",
    ]
    assert [s.title for s in doc.sections] == ["00:00:00", "00:05:00"]
    for markup in ("-->", "<v", "<b>", "NOTE", "cue", "align:"):
        assert markup not in doc.text


def test_subrip_captions_lose_their_numbers_timings_and_markup(tmp_path: Path) -> None:
    doc = load_path(write(tmp_path / "captions.srt", CAPTIONS))
    assert doc.text.split("\n\n") == [
        "00:00:00",
        "ANA: The beam turns every ten seconds.",
        "Ben: Since 1998?",
    ]
    found = sniff(CAPTIONS.encode())
    assert found is not None and found.name == "Subtitles"  # (no extension needed)
    found = sniff(MEETING.encode())
    assert found is not None and found.name == "Subtitles"


def test_a_file_without_cues_says_so(tmp_path: Path) -> None:
    with pytest.raises(UnreadableFile, match="holds no cue"):
        load_path(write(tmp_path / "empty.vtt", "WEBVTT\n\nNOTE nothing was said\n"))


def test_a_transcript_is_indexed_and_cited_by_its_time(tmp_path: Path) -> None:
    path = write(tmp_path / "meeting.vtt", MEETING)
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        [result] = t.add([PathSource(path)], workspace_id="w")
        assert result.status == "indexed", result.error
        hits = t.search("when is the oil order due", scope="workspace", workspace_id="w")
        assert hits and "Friday" in hits[0].text
        assert hits[0].section_title == "00:05:00"
