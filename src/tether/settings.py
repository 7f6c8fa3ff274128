"""Settings: the ``[rag]`` and ``[llm]`` keys of DESIGN.md, from arguments, environment and TOML.

Precedence, highest first: explicit arguments, ``TETHER_*`` environment variables
(``TETHER_RAG__CHUNK_SIZE=800``; ``TETHER_DB``), then ``tether.toml`` (or the file named by
``TETHER_CONFIG``), then the defaults below. This is the only module that reads the
environment, and it reads it when ``Settings.load()`` is called, never at import.

```toml
# tether.toml
db = "tether.db"

[rag]
chunk_size = 1200
chunk_overlap = 150
scope = "global"

[rag.embeddings]
enabled = true
provider = "local"

[llm]
base_url = "http://localhost:11434/v1"
model = "llama3.1"
```
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from tether.errors import ConfigurationError

DEFAULT_CONFIG_FILE = "tether.toml"
DEFAULT_DB = "tether.db"


class EmbeddingSettings(BaseModel):
    """The ``[rag.embeddings]`` section. ``model`` defaults per provider (all-MiniLM-L6-v2
    locally, text-embedding-3-small remotely); ``base_url``/``api_key`` default to ``[llm]``'s."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    provider: Literal["local", "openai"] = "local"
    model: str | None = None
    model_path: str | None = None
    device: str = Field(
        "auto",
        pattern=r"^(auto|cpu|mps|cuda(:\d+)?)$",
        description="where a local model runs: auto (a CUDA GPU when torch sees one, else"
        " Apple's MPS, else the CPU), cpu, cuda, cuda:N or mps",
    )
    precision: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        "auto",
        description="a local model's floating-point type: auto (float16 on a CUDA GPU,"
        " float32 elsewhere), float32, float16 or bfloat16",
    )
    runtime: Literal["auto", "torch", "onnx-int8"] = Field(
        "auto",
        description="what runs a local model: torch (sentence-transformers, any device),"
        " onnx-int8 (ONNX Runtime with int8 weights on the CPU, exported once from the"
        " installed model and cached; its vectors are stored apart, so switching re-embeds)"
        " or auto (the runtime of the store's vectors; onnx-int8 for a new store when"
        " onnxruntime is installed and the model runs on the CPU, else torch)",
    )
    cache_dir: str | None = Field(
        None,
        description="where the onnx-int8 runtime keeps its export (default"
        " $XDG_CACHE_HOME/tether, else ~/.cache/tether)",
    )
    base_url: str | None = None
    api_key: SecretStr | None = None
    timeout: float = Field(30.0, gt=0)
    warm_at_open: bool = Field(
        False,
        description="load the model and the stored vectors in the background when a"
        " Tether opens (Tether.warmup), so that no retrieval waits for them",
    )

    @model_validator(mode="after")
    def _runtime_fits(self) -> EmbeddingSettings:
        if self.runtime == "onnx-int8":
            if self.provider != "local":
                raise ValueError('runtime "onnx-int8" runs a local model; use provider "local"')
            if self.device not in ("auto", "cpu"):
                raise ValueError(
                    f'runtime "onnx-int8" runs on the CPU, not {self.device!r}; use device'
                    ' "auto" or "cpu", or runtime "torch" for a GPU'
                )
            if self.precision not in ("auto", "float32"):
                raise ValueError(
                    f'runtime "onnx-int8" has int8 weights; precision {self.precision!r}'
                    ' applies to runtime "torch"'
                )
        return self


class RerankSettings(BaseModel):
    """The ``[rag.rerank]`` section: the heuristic rerank's factors."""

    model_config = ConfigDict(extra="forbid")

    max_per_document: int = Field(
        2, ge=1, description="chunks of one document taken before other documents' turn"
    )
    evidence_weight: float = Field(
        0.9,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="share of the question match (vs the fused score) in the rerank's base",
    )
    title_weight: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="bonus for a section title that shares the question's terms",
    )
    recency_margin: float = Field(
        0.02,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="score gap within which the session's newest document wins",
    )
    priority_weight: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="bonus per unit of a document's metadata priority (-1..1)",
    )
    llm_candidates: int = Field(
        20, ge=2, le=50, description="candidates an LLM rerank scores (the rest keep order)"
    )
    model_path: str | None = Field(
        None,
        description="a local cross-encoder or NLI model that reads question and passage"
        " together (a sentence-transformers CrossEncoder folder, or a folder with an ONNX"
        " export and tokenizer.json): its probability becomes each candidate's relevance",
    )


class RagSettings(BaseModel):
    """The ``[rag]`` section."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    scope: Literal["session", "workspace", "global"] = "global"
    language: Literal["english", "french", "german", "spanish"] = Field(
        "english", description="stopwords and stemmer of the lexical side; a store is made for one"
    )
    # A chunk the embedder reads whole: sized in its tokens when its window and a tokenizer
    # are known (all-MiniLM-L6-v2: 256, header included), else in characters (1200: about
    # 250-300 MiniLM word pieces). Overlap keeps a sentence cut at a boundary findable from
    # both sides.
    chunk_by: Literal["tokens", "chars"] = Field(
        "tokens",
        description="size chunks in the embedder's tokens (when its window and tokenizer are"
        " known, else in characters) or always in characters (chunk_size)",
    )
    chunk_tokens: int = Field(
        256,
        ge=32,
        le=100_000,
        description="most tokens in a chunk as embedded (its context header included);"
        " the embedder's window caps it",
    )
    chunk_overlap_tokens: int | None = Field(
        None, ge=0, description="tokens shared by adjacent chunks (default 15% of a chunk)"
    )
    chunk_size: int = Field(
        1200, ge=100, le=100_000, description="characters per chunk, when not sized in tokens"
    )
    chunk_overlap: int = Field(
        150, ge=0, description="characters shared by adjacent chunks sized in characters"
    )
    # Candidate depths. z-score fusion needs a few hundred candidates a list (its mean and
    # deviation); RRF reads ranks only: FTS5 top 100 instead of 300 left SciFact's nDCG@10
    # unchanged (0.7094 vs 0.7092) and cut the hybrid p50 by a third; a search asks FTS5
    # for at least 1.5 k (Recall@100 0.9510 from 150, as from 300; 0.9493 from 100).
    k_lexical: int | None = Field(
        None,
        ge=1,
        le=10_000,
        description="FTS5 candidates per query (default: 100 with RRF, 300 with z-score)",
    )
    k_vector: int = Field(300, ge=1, le=10_000, description="vector candidates per query")
    # RRF by default: z-score fusion measured higher on SciFact (hybrid nDCG@10 0.736 vs
    # 0.716), but the rerank brings most of that back (bench/RESULTS.md).
    fusion: Literal["rrf", "zscore"] = Field(
        "rrf", description="how the lexical and vector lists are fused: RRF or standardized scores"
    )
    rrf_k: int = Field(60, ge=1, description="RRF constant (fusion = 'rrf'; query rewrites)")
    lexical_weight: float = Field(
        1.0, ge=0.0, allow_inf_nan=False, description="fusion weight of the FTS5 list"
    )
    vector_weight: float = Field(
        1.0, ge=0.0, allow_inf_nan=False, description="fusion weight of the vector list"
    )
    rerank_top_n: int = Field(20, ge=1, le=1000, description="fused candidates reranked")
    max_chunks: int = Field(8, ge=1, le=100, description="chunks in the context, at most")
    context_budget: int = Field(2000, ge=50, description="tokens in the context block")
    decide: Literal["local", "llm"] = Field(
        "local", description="who decides whether a question needs retrieval"
    )
    enable_query_rewrite: bool = False
    rewrite_count: int = Field(3, ge=1, le=3, description="rewrites (queries = 1 + this)")
    enable_llm_rerank: bool = False
    enable_llm_judge: bool = Field(
        False, description="a chat model decides whether the top passages answer the question"
    )
    judge_candidates: int = Field(
        5, ge=1, le=20, description="reranked passages the LLM judge is shown"
    )
    index_text_artifacts: bool = False
    index_workers: int = Field(2, ge=1, le=32, description="background indexing threads")
    convert_workers: int = Field(3, ge=1, le=32, description="files loaded at a time")
    file_timeout: float = Field(
        300.0,
        gt=0,
        description="seconds a file may take to load and chunk before it fails (each page"
        " read by OCR adds rag.ocr_page_timeout)",
    )
    # A hostile file (a PDF whose small stream inflates to gigabytes of operators) is
    # loaded in a worker process that is killed at the timeout or at this much memory.
    loader_memory_mb: int = Field(
        2048, ge=128, description="MB of memory a loader process may use before its file fails"
    )
    max_file_bytes: int = Field(
        64 * 2**20, ge=1, description="bytes a file may have; a larger one fails unread"
    )
    ocr: bool = Field(
        True,
        description="read scanned PDF pages and images by OCR; false: a page with no text"
        " layer is left out, an image fails",
    )
    ocr_engine: Literal["auto", "tesseract", "rapidocr"] = Field(
        "auto", description="OCR engine: auto is tesseract when installed, else RapidOCR"
    )
    ocr_page_timeout: float = Field(
        60.0, gt=0, description="seconds OCR may take on one page before the page is left out"
    )
    min_relevance: float = Field(
        0.4,
        ge=0.0,
        le=1.0,
        description="evidence a chunk needs to reach the context (and to ground the answer)",
    )
    # Chosen on every real-document set together (bench/manuals, bench/docsets): 0.05 sends
    # a session question answered better outside it to the workspace far more often than
    # 0.1 (Flask's sessions 0.55 -> 0.77), for a point or two of the answerable ones.
    wider_scope_margin: float | None = Field(
        0.05,
        ge=0.0,
        le=1.0,
        description="a grounded session (workspace) answer is ungrounded when its workspace"
        " (the global library) holds a match with this much more evidence; None: never look",
    )
    rerank: RerankSettings = Field(default_factory=RerankSettings)
    embeddings: EmbeddingSettings = Field(default_factory=EmbeddingSettings)

    @property
    def lexical_depth(self) -> int:
        """FTS5 candidates per query: ``k_lexical``, or by default 100 with RRF and 300
        with z-score fusion (which needs deep lists to standardize them)."""
        if self.k_lexical is not None:
            return self.k_lexical
        return 300 if self.fusion == "zscore" else 100

    def depths(self, k: int) -> tuple[int, int]:
        """The lexical and vector depths of a hybrid search for the top ``k``: each
        side's setting and at least ``k``; with RRF, the default FTS5 depth is at least
        1.5 ``k`` (z-score fusion keeps its lists as deep as it was tuned on)."""
        lexical = self.lexical_depth
        if self.k_lexical is None and self.fusion == "rrf":
            lexical = max(lexical, math.ceil(1.5 * k))
        return max(k, lexical), max(k, self.k_vector)

    @model_validator(mode="after")
    def _overlap_below_half_the_chunk(self) -> RagSettings:
        if self.chunk_overlap * 2 > self.chunk_size:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be at most half of chunk_size"
                f" ({self.chunk_size})"
            )
        if (self.chunk_overlap_tokens or 0) * 2 > self.chunk_tokens:
            raise ValueError(
                f"chunk_overlap_tokens ({self.chunk_overlap_tokens}) must be at most half of"
                f" chunk_tokens ({self.chunk_tokens})"
            )
        return self


class LLMSettings(BaseModel):
    """The ``[llm]`` section: any OpenAI-compatible chat endpoint (decide, rewrite, rerank)."""

    model_config = ConfigDict(extra="forbid")

    base_url: str | None = None
    api_key: SecretStr | None = None
    model: str | None = None
    # Short JSON judgements: a slow model must not hold a chat turn for long.
    timeout: float = Field(10.0, gt=0, description="seconds per attempt")
    max_retries: int = Field(1, ge=0, le=10, description="retries with backoff (the SDK's)")
    # A hung endpoint must cost one retrieval one wait, not one per step and retry.
    retrieval_budget: float | None = Field(
        None,
        gt=0,
        description="seconds all the model calls of one retrieval (decide, condense, rewrite,"
        " rerank, judge) may take together, retries included; a step with none left is skipped."
        " None: timeout. Within a retrieval's own timeout, the model gets at most what is left"
        " after a reserve for the local stages",
    )


SOURCE_TYPES = ("policy", "guide", "log", "link", "contract")


class PolicySettings(BaseModel):
    """The ``[policy]`` section: tags, source priorities and exclusions, agent limits."""

    model_config = ConfigDict(extra="forbid")

    require_tags: bool = Field(
        False, description="every document must carry domain, source_type, last_verified, version"
    )
    domains: list[str] = Field(
        default_factory=list,
        description="the allowed values of the domain tag (empty: any slug, such as hr)",
    )
    # Source priority, -1..1, applied by the rerank (x rag.rerank.priority_weight):
    # authoritative documents highest, project knowledge bases high, curated links medium.
    priorities: dict[str, float] = Field(
        default_factory=lambda: {
            "policy": 1.0,
            "contract": 1.0,
            "guide": 0.6,
            "link": 0.3,
            "log": 0.0,
        }
    )
    log_retention_days: int = Field(
        90, ge=1, description="logs last verified (or indexed) longer ago are excluded"
    )
    exclude_unverified_urls: bool = Field(
        True, description="exclude web documents (http/https sources) with no last_verified"
    )
    # Agent guard rails (require_grounding): at most this many chunks, each at least this
    # relevant (the grounding evidence, 0-1), within this many seconds for the whole retrieval.
    max_chunks: int = Field(10, ge=1, le=10)
    min_relevance: float = Field(0.5, ge=0.0, le=1.0, allow_inf_nan=False)
    timeout: float = Field(10.0, gt=0, description="seconds for a whole guarded retrieval")
    audit: bool = Field(True, description="append every retrieval to rag_retrieval_log")

    @model_validator(mode="after")
    def _known_source_types(self) -> PolicySettings:
        unknown = set(self.priorities) - set(SOURCE_TYPES)
        if unknown:
            raise ValueError(
                f"priorities names unknown source types {sorted(unknown)};"
                f" use {', '.join(SOURCE_TYPES)}"
            )
        bad = {k: v for k, v in self.priorities.items() if not -1.0 <= v <= 1.0}
        if bad:
            raise ValueError(f"priorities must be between -1 and 1: {bad}")
        return self


class FetchSettings(BaseModel):
    """The ``[fetch]`` section: web pages added by their URL (``tether add https://...``,
    ``Tether.add(url=...)``)."""

    model_config = ConfigDict(extra="forbid")

    max_bytes: int = Field(
        20 * 2**20, ge=1, description="bytes a fetched page may have; a larger one fails"
    )
    timeout: float = Field(30.0, gt=0, description="seconds a fetch may take in all")
    max_redirects: int = Field(5, ge=0, le=20, description="redirects followed, at most")
    allow_private: bool = Field(
        False,
        description="fetch from loopback, private and link-local addresses too (an intranet"
        " wiki); off, such a URL (or a redirect to one) is refused",
    )
    user_agent: str = Field("tether-fetch/0.1", description="the User-Agent header of a fetch")
    proxy: str | None = Field(
        None,
        pattern=r"^http://[^/?#\s]+/?$",
        description="an HTTP proxy to fetch through: http://[user:password@]host[:port]"
        " (HTTPS tunnels through it; none by default, and none is read from HTTP_PROXY)",
    )


class ServerSettings(BaseModel):
    """The ``[server]`` section: who ``tether serve`` answers, and how much one key may ask."""

    model_config = ConfigDict(extra="forbid")

    allowed_hosts: list[str] = Field(
        default_factory=list,
        description=(
            "Host names the server answers besides loopback's (localhost, 127.0.0.1, [::1]):"
            " 'docs.example.com', 'docs.example.com:8443', '*.example.com', or '*'. Empty: a"
            " server without keys answers loopback names only; one with keys answers any"
        ),
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description=(
            "Web origins ('https://app.example.com') whose pages may call the server (CORS)."
            " A request from any other page's origin is refused, whatever its key"
        ),
    )
    requests_per_second: float = Field(
        20.0, ge=0, allow_inf_nan=False, description="per API key, sustained; 0: no limit"
    )
    request_burst: int = Field(40, ge=1, description="per API key, requests at once")
    uploads_per_key: int = Field(
        4, ge=1, description="upload jobs one API key may have waiting or running"
    )
    upload_dir: str | None = Field(
        None,
        description="where accepted uploads wait until indexed, surviving restarts. Default:"
        " beside a SQLite store ('t.db-uploads'); for PostgreSQL, a folder under the system's"
        " temporary folder (set one that outlives reboots)",
    )
    max_queued_upload_bytes: int = Field(
        1 << 30, ge=1, description="bytes of uploads accepted but not yet indexed, all keys"
    )
    metrics: Literal["admin", "open"] = Field(
        "admin", description="who reads /metrics once keys exist: admin keys, or anyone"
    )


class Settings(BaseSettings):
    """All of tether's configuration. Build it with :meth:`load` to read TOML and env."""

    model_config = SettingsConfigDict(
        env_prefix="TETHER_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    db: str = DEFAULT_DB
    rag: RagSettings = Field(default_factory=RagSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    fetch: FetchSettings = Field(default_factory=FetchSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_file = settings_cls.model_config.get("toml_file")
        sources: list[PydanticBaseSettingsSource] = [
            init_settings,
            env_settings,
            _RagFusionEnv(settings_cls),
        ]
        if toml_file:
            sources.append(_read_toml(settings_cls, Path(toml_file)))
        return tuple(sources)

    @classmethod
    def load(cls, config_file: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
        """Settings from ``overrides``, the environment and a TOML file.

        The file is ``config_file`` if given (it must exist), else ``$TETHER_CONFIG`` (it
        must exist), else ``./tether.toml`` when present.
        """
        path: Path | None
        if config_file is not None:
            path = _existing(Path(config_file), "config_file")
        elif os.environ.get("TETHER_CONFIG"):
            path = _existing(Path(os.environ["TETHER_CONFIG"]), "TETHER_CONFIG")
        else:
            path = Path(DEFAULT_CONFIG_FILE)
            path = path if path.is_file() else None
        overrides.pop("config_file", None)
        try:
            if path is None:
                return cls(**overrides)
            with_file = type(
                cls.__name__,
                (cls,),
                {"model_config": {**cls.model_config, "toml_file": path}, "__module__": __name__},
            )
            return with_file(**overrides)
        except ValidationError as exc:
            where = f" (config file {path})" if path else ""
            raise ConfigurationError(f"invalid settings{where}: {_describe(exc)}") from exc


class _RagFusionEnv(PydanticBaseSettingsSource):
    """``RAG_FUSION_ENABLED`` and ``RAG_FUSION_QUERY_COUNT``: the RAG-Fusion switch web
    backends already use, honoured as ``rag.enable_query_rewrite`` and
    ``rag.rewrite_count``. ``TETHER_RAG__*`` variables and explicit arguments win over
    them; they win over the TOML file."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # everything is in __call__

    def __call__(self) -> dict[str, Any]:
        rag: dict[str, Any] = {}
        enabled = os.environ.get("RAG_FUSION_ENABLED", "").strip().lower()
        if enabled:
            if enabled not in _BOOLEANS:
                raise ConfigurationError(
                    f"RAG_FUSION_ENABLED must be true or false, not {enabled!r}"
                )
            rag["enable_query_rewrite"] = _BOOLEANS[enabled]
        count = os.environ.get("RAG_FUSION_QUERY_COUNT", "").strip()
        if count:
            if count not in ("1", "2", "3"):
                raise ConfigurationError(
                    f"RAG_FUSION_QUERY_COUNT must be 1, 2 or 3 (rewrites besides the"
                    f" original question), not {count!r}"
                )
            rag["rewrite_count"] = int(count)
        return {"rag": rag} if rag else {}


_BOOLEANS = dict.fromkeys(("1", "true", "yes", "on"), True) | dict.fromkeys(
    ("0", "false", "no", "off"), False
)


def _read_toml(settings_cls: type[BaseSettings], path: Path) -> TomlConfigSettingsSource:
    """The TOML source, which reads ``path`` as it is built: a file that is not TOML, not
    UTF-8 or not readable is a :class:`ConfigurationError` naming it, not a parser's
    traceback."""
    try:
        return TomlConfigSettingsSource(settings_cls, toml_file=path)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(
            f"config file {path} is not valid TOML: {_toml_problem(path, exc)}"
        ) from exc
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise ConfigurationError(
            f"config file {path} is not UTF-8 text (line {line}); save it as UTF-8"
        ) from exc
    except OSError as exc:
        raise ConfigurationError(f"cannot read config file {path}: {exc.strerror or exc}") from exc


# Python 3.11's TOMLDecodeError has no line attributes, only this at the end of its message.
_TOML_POSITION = re.compile(
    r"^(?P<what>.*) \(at (?:line (?P<line>\d+), column (?P<column>\d+)|end of document)\)$",
    re.S,
)


def _toml_problem(path: Path, exc: tomllib.TOMLDecodeError) -> str:
    """``Invalid value at line 2, column 7``; at the end of the file, its last line."""
    found = _TOML_POSITION.match(str(exc))
    if found is None:
        return str(exc)
    if found["line"] is None:
        last_line = max(1, len(path.read_bytes().splitlines()))
        return f"{found['what']} at line {last_line} (the end of the file)"
    return f"{found['what']} at line {found['line']}, column {found['column']}"


def _existing(path: Path, origin: str) -> Path:
    if not path.is_file():
        raise ConfigurationError(f"{origin} names {path}, which is not a file")
    return path


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        key = ".".join(str(p) for p in error["loc"]) or "settings"
        parts.append(f"{key}: {error['msg']}")
    return "; ".join(parts)
