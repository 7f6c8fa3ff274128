"""Sphinx's own markup in reStructuredText sources, read as Sphinx renders it.

Most reStructuredText documentation is a Sphinx project, and Sphinx adds directives and
roles that plain docutils does not know. docutils reports each unknown one as an error
and drops it, with its content: a ``.. versionadded:: 2.1`` note, a ``.. deprecated::``
warning, a ``.. seealso::`` box, and every ``.. function:: name(args)`` description of an
API reference would be lost, and ``:func:`os.path.join``` would stay as written.

:func:`sphinx_markup` puts Sphinx's common names into docutils' tables for one parse, as
Sphinx does itself, and takes them out again after:

- version notes read as Sphinx prints them ("Added in version 2.1.", "Deprecated since
  version 3.0."), then their text; ``seealso`` reads "See also:" and its text;
- an object's description (``function``, ``class``, ``method``, ``option``, ``envvar``,
  in any domain: ``py:function``, ``c:function``...) is its signature, then its text;
- directives that hold text (``only``, ``glossary``, ``hlist``, ``centered``, ``todo``,
  ``tab``) are their text; those that only steer the build (``toctree``, ``index``,
  ``autofunction`` and the other ``auto*``, ``literalinclude``, ``highlight``,
  ``module``) are nothing;
- a role is its text: the title of ``:ref:`the config <config>```, the last name of
  ``:func:`~os.path.join``` ("join()"), the name of ``:class:`Widget```; so is a role
  only the project's ``conf.py`` defines (``:pypi:`pytest-cov```, ``:issue:`123```).

A name the document's own project registered differently is never replaced.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tether.ingest.markup import role_text

_DOMAINS = ("py", "c", "cpp", "js", "rst", "std")
#: Roles shown as code, and those of them Sphinx writes with "()" after (functions).
_CODE_ROLES = (
    "func meth class mod attr data exc obj const member var type macro enum enumerator"
    " struct union option envvar program command file samp kbd keyword token confval"
    " dir directive role event makevar regexp mimetype manpage"
).split()
_CALLED = {"func", "meth"}
_TEXT_ROLES = "ref doc term any numref download guilabel menuselection abbr dfn".split()
#: Object descriptions: a signature, then its text.
_OBJECTS = (
    "function class method staticmethod classmethod attribute property data exception"
    " module decorator decoratormethod member macro struct union enum enumerator type var"
    " describe object option envvar program cmdoption confval event"
).split()
#: reStructuredText's own domain: prefixed only (docutils' ``role`` directive stays).
_RST_OBJECTS = ["rst:directive", "rst:role", "rst:directive:option"]
_VERSIONS = {
    "versionadded": "Added in version",
    "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version",
    "versionremoved": "Removed in version",
}
_BODIES = "only glossary hlist centered todo tab tabs group-tab code-tab".split()
_STEERING = (
    "toctree index highlight literalinclude currentmodule module moduleauthor sectionauthor"
    " codeauthor tabularcolumns default-domain default-role autosummary graphviz plot"
    " automodule autoclass autofunction automethod autoattribute autodata autoexception"
    " autoproperty autodecorator"
).split()
#: Directives whose argument steers the build, not shown (``.. only:: html``).
_HIDDEN_ARGUMENTS = {"only"}
_LOCK = threading.Lock()
#: An intersphinx inventory's name before an object's (``python:doctest.REPORT_UDIFF``,
#: shown as ``doctest.REPORT_UDIFF``); never C++'s ``std::vector``.
_INVENTORY = re.compile(r"^([~!]?)[A-Za-z_][\w-]*:(?=[A-Za-z_][^:]*$)")


@contextmanager
def sphinx_markup() -> Iterator[None]:
    """docutils' directive and role tables with Sphinx's common names added, for the
    parse inside the block (one at a time; the tables are restored after)."""
    from docutils.parsers.rst import directives, roles

    with _LOCK:
        saved = dict(directives._directives), dict(roles._roles)
        lookup = roles.role
        try:
            for name, directive in _directives().items():
                directives._directives.setdefault(name, directive)
            for name, role in _roles().items():
                roles._roles.setdefault(name, role)
            roles.role = _or_text(lookup)
            yield
        finally:
            roles.role = lookup
            for table, before in zip((directives._directives, roles._roles), saved, strict=True):
                table.clear()
                table.update(before)


def _or_text(lookup: Any) -> Any:
    """docutils' role lookup, where a role neither docutils nor Sphinx knows (one a
    project defines in its ``conf.py``: ``:pypi:`pytest-cov``` from ``sphinx.ext.extlinks``,
    ``:issue:`123```) is its text, as the built page shows it, not the raw markup."""

    def role(name: str, *args: Any, **kwargs: Any) -> tuple[Any, list[Any]]:
        found, messages = lookup(name, *args, **kwargs)
        if found is not None:
            return found, messages
        return _text_role, []

    return role


def _text_role(name: str, rawtext: str, text: str, *_: Any, **__: Any) -> Any:
    from docutils import nodes

    return [nodes.inline(rawtext, role_text(text, called=False))], []


class _AnyOption(dict):  # type: ignore[type-arg]
    """An option table that takes every option (``:noindex:``, ``:maxdepth: 2``) as text:
    what Sphinx's directives accept is not this reader's to check."""

    def __init__(self) -> None:
        super().__init__({"": str})  # (not empty: docutils reads options only then)

    def __missing__(self, key: str) -> Any:
        return lambda value: value


def _in_domains(names: list[str]) -> list[str]:
    return names + [f"{domain}:{name}" for domain in _DOMAINS for name in names]


@functools.cache
def _roles() -> dict[str, Any]:
    from docutils import nodes

    def role(name: str, rawtext: str, text: str, *_: Any, **__: Any) -> Any:
        kind = name.rpartition(":")[2]
        if kind in _CODE_ROLES:
            text = _INVENTORY.sub(r"\1", text.strip(), count=1)
        shown = role_text(text, called=kind in _CALLED)
        node = nodes.literal if kind in _CODE_ROLES else nodes.inline
        return [node(rawtext, shown)], []

    return {name: role for name in _in_domains(_CODE_ROLES + _TEXT_ROLES)}


@functools.cache
def _directives() -> dict[str, Any]:
    from docutils import nodes
    from docutils.parsers.rst import Directive

    class Body(Directive):
        """Its text (and its arguments', as a first paragraph)."""

        optional_arguments = 1
        final_argument_whitespace = True
        has_content = True
        option_spec = _AnyOption()

        def lead(self) -> list[str]:
            return [] if self.name in _HIDDEN_ARGUMENTS else list(self.arguments)

        def run(self) -> list[Any]:
            box = nodes.container()
            for text in self.lead():  # (inline markup read, as in a paragraph)
                box += nodes.paragraph(text, "", *self.state.inline_text(text, self.lineno)[0])
            self.state.nested_parse(self.content, self.content_offset, box)
            return [box]

    class Version(Body):
        required_arguments = 1
        optional_arguments = 1

        def lead(self) -> list[str]:
            return [f"{_VERSIONS[self.name]} {self.arguments[0]}.", *self.arguments[1:]]

    class SeeAlso(Body):
        def lead(self) -> list[str]:
            return [" ".join(["See also:", *self.arguments])]

    class Signature(Body):
        def run(self) -> list[Any]:
            box = nodes.container()
            for signature in self.arguments[0].splitlines() if self.arguments else []:
                box += nodes.paragraph("", "", nodes.literal(text=signature.strip()))
            self.state.nested_parse(self.content, self.content_offset, box)
            return [box]

    class Steering(Body):
        def run(self) -> list[Any]:
            return []

    table: dict[str, Any] = {name: Version for name in _VERSIONS}
    table["seealso"] = SeeAlso
    table.update({name: Body for name in _BODIES})
    table.update({name: Steering for name in _STEERING})
    table.update({name: Signature for name in _in_domains(_OBJECTS) + _RST_OBJECTS})
    return table
