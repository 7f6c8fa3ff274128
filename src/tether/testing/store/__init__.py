"""The conformance suite of :class:`~tether.store.Store`, as test classes to inherit.

One class per role of the interface; :class:`StoreContract` is all of them. A backend
passes the suite when a test class inherits it and gives the ``store`` fixture (a fresh,
empty store per test, closed after it)::

    import pytest
    from tether.testing.store import StoreContract

    class TestMyBackend(StoreContract):
        @pytest.fixture
        def store(self, tmp_path):
            backend = MyStore(tmp_path / "data")
            yield backend
            backend.close()

A backend that implements only some roles inherits their classes alone. The tests need
pytest (the ``dev`` extra); importing :mod:`tether.testing` itself does not.
"""

from __future__ import annotations

from tether.testing.store.documents import (
    DocumentsContract,
    LifetimeContract,
    SessionsContract,
    WorkspacesContract,
)
from tether.testing.store.records import (
    ApiKeysContract,
    AuditLogContract,
    EmbeddingsContract,
    LibraryRegistryContract,
    MaintenanceContract,
)
from tether.testing.store.search import ScopedSearchContract

__all__ = [
    "ApiKeysContract",
    "AuditLogContract",
    "DocumentsContract",
    "EmbeddingsContract",
    "LibraryRegistryContract",
    "LifetimeContract",
    "MaintenanceContract",
    "ScopedSearchContract",
    "SessionsContract",
    "StoreContract",
    "WorkspacesContract",
]


class StoreContract(
    LifetimeContract,
    WorkspacesContract,
    SessionsContract,
    DocumentsContract,
    ScopedSearchContract,
    EmbeddingsContract,
    LibraryRegistryContract,
    AuditLogContract,
    ApiKeysContract,
    MaintenanceContract,
):
    """Every role's conformance tests: what a whole :class:`~tether.store.Store` passes."""
