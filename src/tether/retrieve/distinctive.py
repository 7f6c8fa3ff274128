"""Distinctive terms: the words and codes of a question that name exactly what it asks
about, so that a scope which never mentions them cannot answer it.

"Does the S2 support LoRaWAN mesh with Zigbee gateways?" is about the S2, and a scope
full of S2 documentation holds passages on its topic; if "lorawan" and "zigbee" occur
nowhere in the scope, none of them answers it. An ordinary word that the scope lacks
says little (a user writes "wiped" where the manual says "cleared"), so only two kinds
of term count:

- **codes**: option names, identifiers, file and API names, versions and error codes,
  written as they are searched for: ``--listen-addr``, ``SESSION_COOKIE_MAX_AGE``,
  ``config.json``, ``VolumeDriver.Capabilities``, ``asn1_dup_node``, ``IDN2_TOO_BIG_LABEL``,
  ``v2.3``, ``CVE-2024-1234``, ``LoRaWAN``. A code is looked up whole in the scope (the
  full-text index matches its parts as a phrase; an option must also be named with a
  dash before it, as the index drops dashes: ``--ipv4`` is not the word "IPv4"), or by
  its code parts when the rest are plain words ("Rad53-dependent" by ``Rad53``), or a
  ``::`` path by its last part (``f64::NAN`` by "NaN"). A word
  in capitals is an acronym or a keyword (``CSI``, ``OFFSET``), unless the question is
  shouted or the word is an everyday one ("does it NOT start?": emphasis). A scope holds
  a keyword of five letters or more that is also a word where it writes it with a capital
  (``MERGE`` or "Merge", not "merge"), and any other word in capitals in any case (an
  acronym: ``HTTP`` by "http requests", ``JSON`` by "json"), also where a passage found
  for the question names something after it (``CRLF`` by ``crlfDelay``). Lower-case
  words and numbers joined by hyphens ("auto-reload", "0-dimensional") are prose, not
  codes, unless the question writes the compound as a name: quoted (``kind =
  "raw-dylib"``), after an option ("-C inline-threshold") or before a noun that names a
  kind of setting or syntax ("the let-else statement", "the post-rewrite hook"). Such a
  name is looked up as a phrase or joined ("built-in" by "builtin");
- **rare words**: words outside a general English vocabulary (the WordPiece vocabulary
  of the packaged all-MiniLM-L6-v2 tokenizer, about 23,000 whole words, with common
  suffixes and prefixes taken off, or with a regular inflection it lists: "detach" by
  "detached"): product and project names, jargon ("zigbee",
  "uvicorn", "alembic", "soname"). Without the packaged model no word counts as rare. A
  rare word one typing slip away from a word of the passages found for the question
  ("microenviroment") is taken as misspelt, not absent, and one that begins a longer
  word of those passages ("hex" of "hexadecimal", "repo" of "repository") as clipped,
  and one made of the first letters of words that follow each other there ("stdin" of
  "standard input") as abbreviated. An everyday word the question writes as a name,
  with a capital in the middle of a sentence ("the examples Hypothesis generates", "send
  it to Nest"), counts as a rare word: English writes a common noun in lower case there;

- **commands the question calls commands**: "the flask routes command", "the git replay
  command" (a name of two words or more, or one with a hyphen: ``init-db``), looked up as
  a phrase. A scope that documents a command writes its name;

- **numbers that name something**, of two digits or more: a release ("libidn2 2.3.3",
  "v1.10"), a year ("the 2024 edition"), or a number after a word that makes it a name
  ("error 404", "port 8080", "RFC 5891", "section 12"). A quantity is not a name: a
  question may propose a value the scope does not write and still be answered by it
  ("can I upload 300 MB?" of a guide that says "at most 250 MB"), so a number followed by
  a unit, a percentage, or an integer with nothing naming it, is left out; so is a single
  digit ("EPUB 3" is as often "EPUB three"). A number is found however the scope groups
  its thousands ("5000" by "5,000", "2,000" by "2000") and a release with a "v" before
  it ("1.10" by "v1.10").

A question that also makes statements ("I ran ``sed -ni 's/DEBUG/INFO/' app.conf`` and
app.conf ended up empty. What did I do wrong?", "How does diff tell a binary file? It says
so of my UTF-16 exports.") tells its situation there: the asker's files, values, commands
and machine. What it asks is its question sentences, so only a term they name is
distinctive; one only the premise names is not, however rare.

A code or word made of placeholders (``tool::something``, ``foo.rs``, ``"abc"xyz``: the
names examples are written with) stands for any name: the question asks about the kind
of thing, not about that name, so its absence says nothing.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterable
from pathlib import Path

from tether.retrieve.fts import _stem
from tether.text import packaged_vocab_file, vocabulary_ranks

#: A code as written in a question: an option (``-x``, ``--name``), words joined by
#: ``_ . : / ::`` or by ``-`` with a digit, a CamelCase or mixed-case name, a run of
#: three or more capitals with digits or underscores, a word of three or more capitals,
#: or a word holding a digit.
_CODE = re.compile(
    r"(?<![\w-])(?:"
    r"--?[A-Za-z][\w-]*"
    r"|[A-Za-z_][\w]*(?:(?:::|[._:/])[\w-]+)+"
    r"|[A-Za-z]+(?:-\w+)*-\w*\d[\w-]*|\w*\d\w*(?:-\w+)+"
    r"|[a-z]+[A-Z]\w*|[A-Z][a-z]+[A-Z]\w*|[A-Z]{3,}(?![\w-])"
    r"|[A-Za-z][A-Za-z0-9]*_\w+|[A-Za-z]+\d\w*"
    r")"
)
#: The names examples are written with (metasyntactic variables): a code holding one
#: (``tool::something``, ``#[path = "foo.rs"]``) is an example, not a name to look up.
PLACEHOLDERS = frozenset("foo bar baz qux quux foobar xyz abc something anything whatever".split())
#: Abbreviations that look like codes.
_NOT_CODES = frozenset({"e.g", "i.e", "etc", "vs", "a.m", "p.m", "and/or", "w/o"})
_SUFFIXES = (
    "ing",
    "ed",
    "es",
    "s",
    "er",
    "ers",
    "or",
    "ors",
    "ly",
    "d",
    "ness",
    "able",
    "ity",
    "ion",
    "ions",
    "ment",
    "ments",
    "al",
)
_PREFIXES = ("re", "un", "pre", "non", "de", "dis", "mis", "sub", "over", "multi")


def code_terms(question: str) -> list[str]:
    """The codes a question names, in order, each once (trailing punctuation off). A word
    in capitals is a code (an acronym, a keyword, a constant: ``CSI``, ``OFFSET``) unless
    the question is shouted: most of its words in capitals."""
    found: list[str] = []
    words = re.findall(r"[^\W\d_]{2,}", question)
    shouted = sum(1 for w in words if w.isupper()) * 2 > len(words)
    for match in _CODE.finditer(question):
        code = match.group(0).rstrip(".:/-")
        if len(code) < 2 or code in found or code.lower() in _NOT_CODES:
            continue
        if shouted and code.isalpha() and code.isupper():
            continue
        parts = [p for p in re.split(r"[-/]", code) if p]
        if code[0] != "-" and all(p.isdigit() or (p.isalpha() and p.islower()) for p in parts):
            continue  # words and numbers joined: "0-dimensional", "anti-interleukin-2"
        found.append(code)
    return found


#: A command the question calls one: up to four words (and options) before "command" or
#: "subcommand" ("the flask routes command", "the git replay command").
_COMMAND = re.compile(r"((?:[\w.:/-]+\s+){1,4})(?:sub)?command(?![\w-])", re.IGNORECASE)
#: Words that end what comes before a command's name ("the", "my own", "which").
_BEFORE_COMMAND = frozenset(
    "the a an this that these those its their my your our his her own which what each any"
    " one such some another other later more same new old first last".split()
)


def command_terms(question: str) -> list[str]:
    """The commands a question names as commands ("What does the flask routes command
    list?": ``flask routes``), each once: a name of two words or more, or one holding a
    hyphen, a digit or an underscore (``init-db``). A scope that documents a command
    writes its name; one plain word ("the log command") is left to the rare words."""
    found: list[str] = []
    for match in _COMMAND.finditer(question):
        words = match.group(1).split()
        after = [i for i, w in enumerate(words) if w.lower() in _BEFORE_COMMAND]
        name = " ".join(words[after[-1] + 1 :] if after else words)
        plain = len(name.split()) == 1 and re.fullmatch(r"[^\W\d_]+", name)
        if name and not plain and name not in found:
            found.append(name)
    return found


#: A compound of lower-case words joined by hyphens ("raw-dylib", "let-else").
_COMPOUND = r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+"
#: Nouns that make the compound before them a name: "the let-else statement", "the
#: post-rewrite hook", "the inline-threshold option".
_NAME_NOUNS = (
    "statement|statements|option|options|flag|flags|hook|hooks|attribute|attributes"
    "|setting|settings|parameter|parameters|variable|variables|directive|directives"
    "|keyword|keywords|lint|lints|field|fields|key|keys|property|properties|macro|macros"
)
#: A compound written as a name: quoted, after an option (``-C inline-threshold``), or
#: before a noun of :data:`_NAME_NOUNS`.
_NAMED_COMPOUND = re.compile(
    rf"[\"'`‘“]({_COMPOUND})[\"'`’”]"
    rf"|(?<![\w-])-{{1,2}}[A-Za-z][\w-]*\s+({_COMPOUND})(?![\w-])"
    rf"|(?<![\w-])({_COMPOUND})\s+(?:{_NAME_NOUNS})(?![\w-])"
)


def compound_names(question: str) -> dict[str, list[str]]:
    """The hyphenated compounds of lower-case words that a question writes as names
    (``kind = "raw-dylib"``, "rustc's -C inline-threshold option", "a let-else
    statement"), each with the one other way a scope writes it: joined ("built-in",
    "builtin"). As prose ("hand-written", "tmpfs-backed") a compound is left out, as
    :func:`code_terms` leaves it: the scope may say it in other words; a name it writes."""
    found: dict[str, list[str]] = {}
    for match in _NAMED_COMPOUND.finditer(question):
        name = next(g for g in match.groups() if g)
        if not name.replace("-", "").isdigit():
            found.setdefault(name, [name.replace("-", "")])
    return found


#: A number standing alone: digits, maybe dotted (``1.7``, ``2.3.3``) or with its
#: thousands grouped (``2,000``), not part of a code (``eth0.50``, ``AVX-512``, ``1.5x``).
_NUMBER = re.compile(r"(?<![\w.,-])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)*)(?![\w%-]|[.,]\d|\.\w)")
#: Words that make the number after them a name, not a quantity.
_NAMING = frozenset(
    "version versions release releases edition editions v error errors code codes status"
    " issue issues bug bugs pr pep rfc iso ecma chapter chapters section sections article"
    " part step revision rev build api level model number no port ports errno exit"
    " firmware kernel python java node ubuntu debian android ios windows macos".split()
)
#: Words that make the number before them a quantity.
_UNITS = frozenset(
    "b kb mb gb tb kib mib gib tib bytes byte bits bit ms s sec secs second seconds min"
    " mins minute minutes h hour hours day days week weeks month months year years px pt"
    " em mm cm m km kg g mhz ghz hz kbps mbps gbps percent times rows items files users"
    " entries lines characters chars requests records connections threads workers"
    " degrees dpi".split()
)


def number_terms(question: str) -> dict[str, list[str]]:
    """The numbers of two digits or more that name something in a question (a release, a
    year, a number after a naming word; not a quantity), each with the ways a text may
    write it (``5000``, ``5,000``; ``1.10``, ``v1.10``)."""
    found: dict[str, list[str]] = {}
    for match in _NUMBER.finditer(question):
        number = match.group(1)
        digits = number.replace(",", "")
        if sum(c.isdigit() for c in digits) < 2 or digits in found:
            continue
        before = re.search(r"([A-Za-z]+)[\s#:]*$", question[: match.start()])
        after = re.match(r"\s*([A-Za-z]+)\b", question[match.end() :])
        if after and after.group(1).lower() in _UNITS:
            continue  # a quantity: "300 MB", "1.5 seconds", "2000 rows"
        dotted = "." in digits
        year = number.isdigit() and len(number) == 4 and 1900 <= int(number) <= 2099
        if not (dotted or year or (before and before.group(1).lower() in _NAMING)):
            continue
        spellings = [digits, f"v{digits}"] if dotted else [digits]
        if digits.isdigit() and len(digits) >= 4 and not digits.startswith("0"):
            spellings.append(f"{int(digits):,}")
        found[digits] = spellings
    return found


_CARDINALS = (
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    " fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_ORDINALS = (
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth"
    " thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth"
).split()
#: Numbers written as words, cardinal and ordinal ("twelve", "twelfth", "forty").
NUMBER_WORDS = frozenset(
    [*_CARDINALS, *_TENS, *_ORDINALS, "zero", "dozen", "hundred", "thousand"]
    + ["million", "billion", "hundredth", "thousandth", "millionth"]
    + [tens[:-1] + "ieth" for tens in _TENS]
)


def placeholder(term: str) -> bool:
    """Whether ``term`` (a code or a word) holds a placeholder name (:data:`PLACEHOLDERS`)
    as one of its parts, or is an expression written with single letters (``s/x/y/3g``,
    ``a.b.c``: three or more, none longer): it is an example of a kind of name, not a
    name. (Two single letters are often a name: ``I/O``, ``r2q``.)"""
    parts = re.findall(r"[a-z]+", term.lower())
    if len(parts) >= 3 and all(len(part) == 1 for part in parts):
        return True
    return any(part in PLACEHOLDERS for part in parts)


#: SQL words after which a statement names the user's own table, savepoint or alias.
_SQL_NAMING = "TABLE|INTO|FROM|JOIN|UPDATE|TO|SAVEPOINT|RELEASE|INDEX|VIEW|TRIGGER|AS"


def with_parts(names: set[str]) -> set[str]:
    """``names`` and the words they are made of (``mk_header``: "mk", "header"): a name
    the user gave their own thing says nothing of the scope, nor do its words."""
    return names | {part for name in names for part in re.split(r"[\W_]+", name) if part}


#: Extensions of files people name in questions (a dotted name ending otherwise, such as
#: ``process.exit``, is an API).
_EXTENSIONS = (
    "txt|log|csv|tsv|json|jsonl|yaml|yml|toml|xml|html|htm|md|rst|ini|cfg|conf|env|db"
    "|sqlite|sql|py|js|mjs|cjs|ts|rs|go|java|rb|php|sh|png|jpg|jpeg|gif|svg|pdf|docx"
    "|xlsx|pptx|zip|tar|gz|bin|dat|pem|crt|key"
)
#: A name the question gives its own things: "a column named qty", "a file named
#: Q1.HTML", "one of my tables sqlite_users", "my own macros such as `mk_header`",
#: "ROLLBACK TO sp1", "INSERT INTO t1", "CHECK (qty > 0)".
_OWN_NAME = re.compile(
    rf"(?i:\b(?:called|named)\s+[`'\"]?)([A-Za-z_]\w*(?:\.(?i:{_EXTENSIONS})(?![\w.]))?)"
    r"|(?i:\b(?:my|our)\s+(?:own\s+)?)[a-z]+,?\s+(?i:(?:such\s+as|e\.g\.,?|for\s+example,?)\s+)?"
    r"[`'\"]?([a-z_][a-z0-9_]*)(?![\w.:/(-])"
    rf"|\b(?:{_SQL_NAMING})\s+([a-z_][a-z0-9_]*)(?![\w.:/(-])"
    r"|\(\s*([a-z_][a-z0-9_]*)\s*(?:[<>]=?|!?=|<>)"
)


def own_names(question: str) -> set[str]:
    """The names a question gives its own tables, columns, branches or files (lower
    case): the user's example, as ``foo`` is, not a name the scope must hold. Only a plain
    identifier counts (a function called with brackets, a dotted or ``::`` path, an
    option are names of the documented thing), or a file name after "called" or "named"
    (``Q1.HTML``), and only where the question says it is its own: after "called" or
    "named"; after "my" or "our" and a noun, or such a noun and "such as" or "for
    example" (``my own macros such as `mk_header```); as an operand of SQL (``INSERT INTO
    t1``, ``ROLLBACK TO sp1``) or of a comparison in brackets (``CHECK (qty > 0)``)."""
    return {
        name.lower() for match in _OWN_NAME.finditer(question) for name in match.groups() if name
    }


#: A word written with a capital in the middle of a sentence: after a word in lower case
#: or a comma (not after a sentence's end, a colon or an opening quote or bracket), and
#: whole (not the head of "Artemisinin-based", "Class1" or "Flask.app").
_PROPER = re.compile(r"(?<=[a-z0-9,;)]\s)([A-Z][a-z]{2,})(?!\w|[-.]\w)")


def proper_names(question: str) -> set[str]:
    """The everyday words a question writes as names (lower case): capitalized in the
    middle of a sentence ("the examples Hypothesis generates", "with Jenkins"). English
    writes a common noun in lower case there, so the capital makes it a name (a library,
    a product, a company), and a scope that never writes the word cannot be about it.
    A question in title case ("How Do I Reset The Hub?": most of its words capitalized)
    says nothing by its capitals, and has none."""
    names = {m.group(1).lower() for m in _PROPER.finditer(question)}
    words = re.findall(r"(?<![\w'’-])[^\W\d_]{3,}", question)[1:]
    if names and sum(1 for w in words if w[0].isupper()) * 2 > len(words):
        return set()
    return names


#: A file name: a word and a file extension (``data.csv``).
_FILE_NAME = re.compile(rf"(?<![\w./-])([A-Za-z]+)\.(?i:{_EXTENSIONS})(?![\w/-]|\.\w)")


def own_files(question: str, common: CommonWords) -> set[str]:
    """The files a question names by an everyday word (``data.csv``, ``report.txt``,
    ``app.log``, ``settings.json``), lower case: the user's own files, as ``foo.rs`` is an
    example. A documented file has a name of its own (``rustfmt.toml``, ``mime.cache``,
    ``config.json``: "config" is no word of the vocabulary), and without a vocabulary no
    file is taken as the user's."""
    if not common:
        return set()
    return {
        m.group(0).lower()
        for m in _FILE_NAME.finditer(question)
        if common.is_common(m.group(1)) and not m.group(1).isupper()
    }


def word_forms(word: str) -> set[str]:
    """``word`` and its likely inflections and derivations, for a lookup in an index that
    matches whole words only."""
    base = _stem(word)
    forms = {word, base}
    for stem in {base, base[:-1] if base.endswith("e") else base}:
        forms |= {
            stem + ending
            for ending in (
                "s",
                "es",
                "ed",
                "d",
                "e",
                "ing",
                "er",
                "ers",
                "ion",
                "ions",
                "ment",
                "or",
            )
        }
    return {f for f in forms if len(f) > 1}


def code_cores(code: str) -> list[str]:
    """The parts of a code joined by ``-`` or ``/`` that are codes themselves, when some of
    its parts are plain words: "Rad53-dependent" is about ``Rad53``, and a scope that
    says "Rad53" but never "Rad53-dependent" still holds it. Empty when every part is
    plain (nothing to look up apart) or none is (an identifier to match whole:
    ``CVE-2024-1234``).

    A path joined by ``::`` (Rust, C++, Ruby, PHP) names its last part in the namespace
    of the others, and documentation names the item by itself as often as by its path
    ("NaN" for ``f64::NAN``): the last part is what is looked up, in any case (a
    constant in capitals is no keyword that text writes in capitals). Names joined by ``/``
    stand side by side ("GNU/Linux", "TCP/IP"): each is looked up. A word of the path
    the scope never names is still a word the question names, and counts as any other
    (a rare word absent from the scope is distinctive)."""
    if "::" in code.strip(":"):
        return [code.rstrip(":").rpartition("::")[2].lower()]
    if re.fullmatch(r"[A-Za-z]+(?:/[A-Za-z]+)+", code) and not code.islower():
        return code.split("/")  # names side by side: "GNU/Linux", "FO/PDF", "TCP/IP"
    parts = [p for p in re.split(r"[-/]", code) if p]
    plain = [p for p in parts if p.isalpha() and p.islower()]
    if not plain or len(plain) == len(parts):
        return []
    return [p for p in parts if p not in plain and not p.isdigit()]


#: Words up to this rank in the vocabulary ("the", "still", "again") say nothing by their
#: absence from a scope; see :meth:`CommonWords.absence_weight`.
COMMON_RANK = 300
#: Words from this rank on (and words outside the vocabulary) say as much as they can.
RARE_RANK = 20_000


def _stems(word: str, *, prefixes: bool = True) -> set[str]:
    """``word`` without a common suffix (with an ``e`` put back) or prefix."""
    stems = {word[: -len(s)] for s in _SUFFIXES if word.endswith(s) and len(word) > len(s) + 2}
    stems |= {stem + "e" for stem in stems}
    if prefixes:
        stems |= {
            word[len(p) :] for p in _PREFIXES if word.startswith(p) and len(word) > len(p) + 3
        }
    return stems


def _inflected(word: str) -> tuple[str, ...]:
    """``word``'s regular inflections: a vocabulary that lists "detached" but not
    "detach" still knows the verb. Inflections only, not :func:`word_forms`: its
    derivations would make "glob" common by "global", "extern" by "external"."""
    return tuple(word + ending for ending in _INFLECTIONS)


#: The endings of :func:`_inflected`.
_INFLECTIONS = ("s", "es", "d", "ed", "ing")


class CommonWords:
    """Whole words of a general vocabulary: a WordPiece ``vocab.txt`` (its entries that
    are not ``##`` pieces, special tokens or single characters). Read on first use."""

    def __init__(self, vocab_file: Path | None) -> None:
        self.vocab_file = vocab_file
        self._ranks: dict[str, int] | None = None
        self._lock = threading.Lock()

    @classmethod
    def packaged(cls) -> CommonWords:
        """The vocabulary of the packaged all-MiniLM-L6-v2, or none when it is missing."""
        return cls(packaged_vocab_file())

    @property
    def words(self) -> dict[str, int]:
        """Each word with its rank (0: the most frequent; see
        :func:`~tether.text.vocabulary_ranks`)."""
        with self._lock:
            if self._ranks is None:
                self._ranks = vocabulary_ranks(self.vocab_file)
            return self._ranks

    def __bool__(self) -> bool:
        return bool(self.words)

    def is_common(self, word: str) -> bool:
        """Whether ``word`` (or it without a common suffix or prefix) is in the vocabulary;
        every word is common without one."""
        words = self.words
        word = word.lower()
        if not words or word in words or word.isdigit():
            return True
        return any(form in words for form in (*_stems(word), *_inflected(word)))

    def absence_weight(self, word: str) -> float:
        """How much it says about a scope that it lacks ``word``, from 0 to 1.

        A scope that lacks a rare word lacks its subject; one that lacks an everyday word
        ("kept", "someone", "instead") has most likely said it in other words. The weight
        grows with the logarithm of the word's rank in the vocabulary (or of its form
        without a common suffix, when the vocabulary lacks the word itself): 0 up to
        :data:`COMMON_RANK`, 1 from :data:`RARE_RANK` and for a word the vocabulary lacks
        (every word weighs 1 without one). A number written as a word ("twelve",
        "twelfth") weighs nothing: it is a value the question gives, as "12" is, which a
        scope answers in digits or not at all."""
        words = self.words
        word = word.lower()
        if word in NUMBER_WORDS:
            return 0.0
        rank = words.get(word)
        if rank is None:  # "honoured" by "honour"; not "seed" by "see", "rename" by "name"
            forms = _stems(word, prefixes=False) | set(_inflected(word))
            rank = min((words[w] for w in forms if w in words), default=None)
        if rank is None or not word.isalpha():
            return 1.0
        share = math.log(max(rank, 1) / COMMON_RANK) / math.log(RARE_RANK / COMMON_RANK)
        return max(0.0, min(1.0, share))

    def rare(self, terms: Iterable[str]) -> list[str]:
        """The ``terms`` that are not common words (none without a vocabulary). A single
        letter never is: the vocabulary lists none, so it can say nothing of one (the
        "O" of "O'Brien", a variable's name)."""
        if not self:
            return []
        return [t for t in terms if len(t) > 1 and t.isalpha() and not self.is_common(t)]
