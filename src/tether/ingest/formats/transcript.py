"""Subtitles and transcripts (WebVTT ``.vtt``, SubRip ``.srt``): what was said, by whom,
and when.

A meeting's or a video's transcript is a run of cues, each a time span and a line or two of
speech. Read as plain text, every sentence is cut by a cue number and a timing line and
carries its markup (``<v Ana>``, ``<i>``). This reader keeps the speech: each turn is a
paragraph that opens with its speaker's name where the file names one (WebVTT's ``<v
Ana>``, a line that opens with ``Ana:``), cues of one turn are joined, a line a rolling
caption repeats is kept once, markup and the file's own notes and styles are dropped, and
the text is in sections of :data:`WINDOW_SECONDS`, each titled by its start time
(``00:05:00``), so that a citation says where in the recording it was said.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from tether.errors import UnreadableFile
from tether.ingest.formats.data import TextBuilder, _document
from tether.ingest.loaders import FileBytes, LoadedDocument, decode_text

MIME = "text/vtt"
#: The span of recording each section holds.
WINDOW_SECONDS = 300
_TIMING = re.compile(
    r"(?:(\d+):)?(\d{1,2}):(\d{2})[.,](\d{1,3})\s*-->\s*(?:\d+:)?\d{1,2}:\d{2}[.,]\d{1,3}"
)
_VOICE = re.compile(r"<v(?:\.[\w.-]+)?\s+([^>]+)>")
_TAG = re.compile(r"</?[a-zA-Z][^>]*>|<\d[\d:.]*>|\{\\[^}]*\}")
#: A speaker named at a line's start ("Ana:", "DR. LEE:", "[Ben]").
_SPEAKER = re.compile(r"^(?:\[([^\]]{1,40})\]|([A-Z][\w .'-]{0,38}[\w.]):)\s+")


@dataclass
class _Cue:
    start: float
    speaker: str
    text: str


def load_transcript(file: FileBytes) -> LoadedDocument:
    """A WebVTT or SubRip file's speech, by turns and by time (see the module)."""
    text = decode_text(file).replace("\r\n", "\n").replace("\r", "\n")
    cues = _cues(text)
    if not cues:
        raise UnreadableFile(str(file.path), "holds no cue (no line such as 00:00:01.000 --> ...)")
    builder = TextBuilder()
    window = -1
    turn: list[str] = []
    speaker = ""
    for cue in cues:
        if int(cue.start // WINDOW_SECONDS) != window or (cue.speaker and cue.speaker != speaker):
            _write(builder, speaker, turn)
            turn = []
            speaker = cue.speaker or speaker
        if int(cue.start // WINDOW_SECONDS) != window:
            window = int(cue.start // WINDOW_SECONDS)
            builder.heading(_clock(window * WINDOW_SECONDS), 1)
        if not turn or turn[-1] != cue.text:  # (a rolling caption repeats its last line)
            turn.append(cue.text)
    _write(builder, speaker, turn)
    title = _title(text) or file.stem
    return _document(file, builder, MIME, [], title)


def _cues(text: str) -> list[_Cue]:
    cues = []
    for block in re.split(r"\n[ \t]*\n", text):
        lines = block.strip("\n").split("\n")
        timed = [(i, found) for i, line in enumerate(lines[:3]) if (found := _TIMING.search(line))]
        if not timed or lines[0].startswith(("NOTE", "STYLE", "REGION")):
            continue
        at, timing = timed[0]
        hours, minutes, seconds, millis = timing.groups()
        start = int(hours or 0) * 3600 + int(minutes) * 60 + int(seconds) + int(millis) / 1000
        speaker, spoken = "", []
        for line in lines[at + 1 :]:
            voice = _VOICE.search(line)
            if voice:
                speaker = voice.group(1).strip()
            line = html.unescape(_TAG.sub("", line)).strip()
            named = _SPEAKER.match(line)
            if named:
                speaker = (named.group(1) or named.group(2)).strip()
                line = line[named.end() :]
            if line:
                spoken.append(line)
        if spoken:
            cues.append(_Cue(start, speaker, " ".join(spoken)))
    return cues


def _write(builder: TextBuilder, speaker: str, turn: list[str]) -> None:
    if turn:
        said = " ".join(turn)
        builder.block(f"{speaker}: {said}" if speaker else said)


def _clock(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _title(text: str) -> str:
    """A WebVTT file's own title (``WEBVTT - Weekly lamp meeting``), if any."""
    first = text.lstrip("\ufeff").split("\n", 1)[0]
    if first.startswith("WEBVTT"):
        return first[6:].strip(" \t-:")
    return ""
