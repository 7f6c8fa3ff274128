"""Settings: defaults, TOML, environment, explicit arguments, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether import ConfigurationError, Settings
from tether.settings import RagSettings


def test_defaults() -> None:
    s = Settings.load()
    assert s.db == "tether.db"
    assert s.rag.rrf_k == 60
    assert s.rag.scope == "global"
    assert s.rag.chunk_overlap * 2 <= s.rag.chunk_size
    assert s.rag.embeddings.provider == "local"
    assert s.llm.api_key is None


def test_precedence_arguments_over_env_over_toml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tether.toml").write_text(
        'db = "from-toml.db"\n[rag]\nchunk_size = 900\nk_lexical = 7\nscope = "workspace"\n'
        "[rag.embeddings]\nenabled = false\n"
    )
    s = Settings.load()
    assert (s.db, s.rag.chunk_size, s.rag.k_lexical, s.rag.scope) == (
        "from-toml.db",
        900,
        7,
        "workspace",
    )
    assert s.rag.embeddings.enabled is False

    monkeypatch.setenv("TETHER_RAG__CHUNK_SIZE", "700")
    monkeypatch.setenv("TETHER_DB", "from-env.db")
    s = Settings.load()
    assert (s.db, s.rag.chunk_size, s.rag.k_lexical) == ("from-env.db", 700, 7)

    s = Settings.load(db="explicit.db", rag={"chunk_size": 500, "chunk_overlap": 50})
    assert (s.db, s.rag.chunk_size) == ("explicit.db", 500)


def test_config_file_argument_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other.toml"
    other.write_text("[rag]\nrrf_k = 10\n")
    assert Settings.load(other).rag.rrf_k == 10
    monkeypatch.setenv("TETHER_CONFIG", str(other))
    assert Settings.load().rag.rrf_k == 10
    monkeypatch.setenv("TETHER_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigurationError, match="TETHER_CONFIG"):
        Settings.load()
    with pytest.raises(ConfigurationError, match="not a file"):
        Settings.load(tmp_path / "missing.toml")


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ("[rag]\nchunk_sise = 10\n", "chunk_sise"),
        ("[rag]\nchunk_size = 1000\nchunk_overlap = 600\n", "chunk_overlap"),
        ("[rag]\nrewrite_count = 4\n", "rewrite_count"),
        ('[rag]\nscope = "universe"\n', "scope"),
        ('[rag.embeddings]\nprovider = "magic"\n', "provider"),
        ("[rag]\nchunk_size = 10\n", "chunk_size"),
    ],
)
def test_invalid_settings_name_the_key(tmp_path: Path, toml: str, needle: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(toml)
    with pytest.raises(ConfigurationError, match=needle) as info:
        Settings.load(path)
    assert str(path) in str(info.value)


def test_env_values_are_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_RAG__K_LEXICAL", "lots")
    with pytest.raises(ConfigurationError, match="k_lexical"):
        Settings.load()


def test_api_key_is_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_LLM__API_KEY", "sk-very-secret")
    s = Settings.load()
    assert s.llm.api_key is not None
    assert s.llm.api_key.get_secret_value() == "sk-very-secret"
    assert "sk-very-secret" not in repr(s)


def test_the_documented_toml_example_is_valid(tmp_path: Path) -> None:
    """The example tether.toml in docs/configuration.md loads as it is, and its [rag]
    values are the real defaults (the page documents them)."""
    import re
    import tomllib

    from helpers import REPO_ROOT

    page = (REPO_ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    block = re.search(r"```toml\n(.*?)```", page, re.S)
    assert block is not None
    path = tmp_path / "example.toml"
    path.write_text(block.group(1))
    s = Settings.load(path)
    assert s.rag.embeddings.provider == "local"
    documented = tomllib.loads(block.group(1))["rag"]
    defaults = RagSettings()
    scalars = {key: value for key, value in documented.items() if not isinstance(value, dict)}
    assert len(scalars) >= 8
    for key, value in scalars.items():
        assert getattr(defaults, key) == value, key
    assert s.llm.base_url == "http://localhost:11434/v1"


def test_lexical_depth_defaults_by_fusion_and_reaches_past_k() -> None:
    """RRF reads ranks, so 100 FTS5 candidates do; z-score standardizes each list, so it
    reads 300. With RRF a default list is at least 1.5 k deep; a set one is as set."""
    rrf, zscore = RagSettings(), RagSettings(fusion="zscore")
    assert (rrf.lexical_depth, zscore.lexical_depth) == (100, 300)
    assert rrf.depths(10) == (100, 300)
    assert rrf.depths(100) == (150, 300)
    assert rrf.depths(1000) == (1500, 1000)
    assert zscore.depths(10) == (300, 300)
    assert zscore.depths(300) == (300, 300)  # z-score: the depths it was measured with
    assert zscore.depths(400) == (400, 400)
    assert RagSettings(k_lexical=40, k_vector=10).depths(30) == (40, 30)
    assert RagSettings(k_lexical=40).lexical_depth == 40
