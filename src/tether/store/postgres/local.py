"""A throwaway PostgreSQL 16 server with pgvector, started from Python (the ``pgserver``
wheel: no system packages, no network), for tests and benchmarks of the PostgreSQL
backend.

    >>> with LocalPostgres("/tmp/tether-pg") as pg:          # doctest: +SKIP
    ...     url = pg.new_database()
    ...     t = Tether(db=url)

Each :meth:`LocalPostgres.new_database` is a fresh database with the tether schema,
copied from a template migrated once (fast: a file copy, not ten migrations).
"""

from __future__ import annotations

import itertools
import os
import threading
import warnings
from pathlib import Path
from types import TracebackType
from typing import Any

_TEMPLATE = "tether_template"


class LocalPostgres:
    """A PostgreSQL server whose data lives in ``folder`` (made if missing), stopped by
    :meth:`stop` or when the ``with`` block ends."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs: "XDG_RUNTIME_DIR is not set"
            try:
                import pgserver
            except ImportError as exc:
                raise ImportError(
                    "a local PostgreSQL server needs the pgserver wheel: pip install pgserver"
                ) from exc
            self._server: Any = pgserver.get_server(self.folder, cleanup_mode="stop")
        self.url: str = self._server.get_uri()
        self._names = itertools.count()
        self._lock = threading.Lock()
        self._template = False

    def database_url(self, name: str) -> str:
        """The URL of the database ``name`` on this server."""
        base, _, query = self.url.partition("?")
        return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")

    def new_database(self, prefix: str = "tether", *, empty: bool = False) -> str:
        """A new database holding an empty tether store (``empty``: nothing at all, for
        the first connection to migrate); its URL."""
        import psycopg

        from tether.store.postgres import PostgresStore

        with self._lock:
            name = f"{prefix}_{os.getpid()}_{next(self._names)}"
            with psycopg.connect(self.url, autocommit=True) as conn:
                if not self._template:
                    conn.execute(f"DROP DATABASE IF EXISTS {_TEMPLATE}")
                    conn.execute(f"CREATE DATABASE {_TEMPLATE}")
                    PostgresStore.connect(self.database_url(_TEMPLATE)).close()
                    self._template = True
                template = "template1" if empty else _TEMPLATE
                conn.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
        return self.database_url(name)

    def drop_database(self, url: str) -> None:
        import psycopg

        name = url.partition("?")[0].rsplit("/", 1)[1]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        self._server.cleanup()

    def __enter__(self) -> LocalPostgres:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
