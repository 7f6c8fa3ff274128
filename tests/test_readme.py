"""The README's layout and examples match the code (docs that cannot drift silently)."""

from __future__ import annotations

import re

from conftest import REPO_ROOT

SRC = REPO_ROOT / "src" / "tether"
README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def _block_after(heading: str, opening: str) -> str:
    """The first fenced block after ``heading`` whose first line starts with ``opening``."""
    start = README.index(heading)
    for match in re.finditer(r"```(\w*)\n(.*?)```", README[start:], re.S):
        if match.group(2).startswith(opening):
            return match.group(2)
    raise AssertionError(f"no ``` block starting with {opening!r} after {heading!r}")


def test_the_layout_names_every_module() -> None:
    layout = _block_after("## Development", "src/tether/")
    words = {word.lstrip("_") for word in re.findall(r"\w+", layout)}
    missing = [
        str(path.relative_to(SRC))
        for path in sorted(SRC.rglob("*.py"))
        if path.name not in ("__init__.py", "__main__.py")
        and (
            path.stem.lstrip("_") not in words
            or (path.parent != SRC and f"{path.parent.name}/" not in layout)
        )
    ]
    assert missing == [], f"README's layout does not show {missing}"


def test_the_testing_example_runs() -> None:
    code = _block_after("### Testing your own code with tether", "from tether import Tether")
    namespace: dict[str, object] = {}
    exec(compile(code, "README", "exec"), namespace)
    t = namespace["t"]
    try:
        t.add(text="The sensor resets with the pin.", title="Guide")  # type: ignore[attr-defined]
        hits = t.search("sensor reset", scope="global", mode="hybrid")  # type: ignore[attr-defined]
        assert hits[0].title == "Guide"
        assert hits.debug["method"] == "hybrid" and hits.debug["degradations"] == []
    finally:
        t.close()  # type: ignore[attr-defined]
