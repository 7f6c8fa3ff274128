"""Web pages added by their URL: :func:`fetch` gets one page, within ``[fetch]``'s limits,
from a public address.

A fetch is a chain of layers, each one concern: :func:`fetch` keeps the deadline and
turns network failures into tether's errors; ``_follow_redirects`` checks every hop's
URL and follows up to ``fetch.max_redirects`` redirects; ``_request`` resolves one hop's
host, connects to an address that passed the check and sends the request; ``_reply``
judges the answer (status, type, length) and reads its body under ``fetch.max_bytes``.

Where it connects: the host is resolved once per hop (by ``resolve``, by default
:func:`resolve_address`), every address is checked (loopback, private, link-local,
multicast, reserved and their IPv4-mapped forms are refused unless
``fetch.allow_private``), and the connection goes to that checked address; the URL's
host only travels in the Host header and, over TLS, as the SNI name the certificate is
checked against. No second lookup happens between the check and the connection, so a
name cannot be re-pointed at an internal address in between (DNS rebinding)
(:mod:`tether.ingest.connection`). A proxy is used only when ``fetch.proxy`` names one
(never one from the environment): the URL's host is still checked as above, but the proxy
looks it up again and connects on its own.

Time: ``fetch.timeout`` bounds the whole fetch, redirects included: the lookup runs
against it, and every send and receive on the socket gets only the time left, so a
server that trickles a byte at a time is cut off at the deadline, not after it.
"""

from __future__ import annotations

import http.client
import ipaddress
import mimetypes
import re
import socket
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import PurePosixPath
from typing import Protocol
from urllib.parse import quote, unquote, urljoin, urlsplit, urlunsplit

from tether.errors import LoadLimitExceeded, UnreadableFile, UnsupportedFileType
from tether.ingest.connection import Proxy, Target, connect, time_left
from tether.ingest.formats import FORMATS, by_extension, sniff
from tether.ingest.loaders import byte_size
from tether.settings import FetchSettings

__all__ = ["Fetched", "Resolver", "fetch", "resolve_address"]

SCHEMES = {"http": 80, "https": 443}
REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: Types that say nothing of the format: the URL's extension (or the content) decides.
GENERIC_TYPES = frozenset({"application/octet-stream", "binary/octet-stream"})
#: The one readable type neither the formats table nor the standard library names.
XHTML = "application/xhtml+xml"
_CHUNK = 64 * 2**10


@dataclass(frozen=True)
class Fetched:
    """A fetched page: ``url`` is where it was found (after redirects, without a
    fragment), ``content_type`` its media type without parameters, ``charset`` the one
    its Content-Type named (lowercase), ``fetched_at`` when (ISO 8601, UTC) and
    ``filename`` a name whose extension tether's loaders read it by."""

    url: str
    data: bytes = field(repr=False)
    content_type: str
    charset: str | None
    fetched_at: str
    filename: str


class Resolver(Protocol):
    """The addresses to connect to for ``url``'s host, already checked: those that
    ``allow_private`` permits, or an :class:`~tether.errors.UnreadableFile` naming the URL
    when there are none."""

    def __call__(self, url: str, *, allow_private: bool) -> list[str]: ...


def fetch(url: str, settings: FetchSettings, *, resolve: Resolver | None = None) -> Fetched:
    """The page at ``url`` (http or https), within ``settings``' limits.

    Raises :class:`UnsupportedFileType` for a scheme or content type tether cannot read,
    :class:`LoadLimitExceeded` past ``fetch.max_bytes``, ``fetch.timeout`` or
    ``fetch.max_redirects`` (``.setting`` names it), and :class:`UnreadableFile` for
    everything else: a refused address, a URL with credentials, an HTTP error status, a
    network failure. Every error's ``source`` is ``url``."""
    deadline = time.monotonic() + settings.timeout
    try:
        reply = _follow_redirects(url, settings, deadline, resolve or resolve_address)
    except TimeoutError as exc:
        raise LoadLimitExceeded(
            url,
            f"took longer than {settings.timeout:g}s to fetch (fetch.timeout); raise"
            " fetch.timeout to give a slow server longer",
            setting="fetch.timeout",
        ) from exc
    except (OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise UnreadableFile(url, f"could not be fetched ({reason})") from exc
    mime = _media_type(reply.headers)
    return Fetched(
        url=reply.url,
        data=reply.data,
        content_type=mime,
        charset=reply.headers.get_content_charset(),
        fetched_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        filename=_filename(url, reply.url, mime, reply.data),
    )


def resolve_address(url: str, *, allow_private: bool) -> list[str]:
    """The addresses ``url``'s host resolves to that may be fetched from: all of them
    with ``allow_private``, else the public ones; :class:`UnreadableFile` when none is."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        found = socket.getaddrinfo(host, parts.port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise UnreadableFile(url, f"its host {host!r} cannot be resolved ({exc})") from exc
    addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
    if not addresses:
        raise UnreadableFile(url, f"its host {host!r} resolves to no address")
    if allow_private:
        return addresses
    refusals = [(address, _refusal(address)) for address in addresses]
    allowed = [address for address, refusal in refusals if refusal is None]
    if not allowed:
        address, refusal = refusals[0]
        where = host if host == address else f"{host!r} ({address})"
        raise UnreadableFile(
            url,
            f"its host {where} is {refusal}; tether fetches from public"
            " addresses only. Set fetch.allow_private = true to fetch from your own"
            " network (an intranet wiki)",
        )
    return allowed


# -- addresses ----------------------------------------------------------------------------

#: 64:ff9b::/96 carries an IPv4 address to a NAT64 gateway, which reaches it.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _refusal(address: str) -> str | None:
    """What kind of non-public address ``address`` is ("a loopback address", ...), or
    None for a public one. An IPv6 address carrying an IPv4 one (mapped, 6to4,
    Teredo, NAT64) is judged by the IPv4 address it reaches too."""
    ip = ipaddress.ip_address(address)
    candidates: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        candidates += _embedded_ipv4(ip)
    for candidate in candidates:
        kind = _kind(candidate)
        if kind is not None:
            return kind
    return None


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    embedded = [ip.ipv4_mapped, ip.sixtofour, *(ip.teredo or ())]
    if ip in _NAT64:
        embedded.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return [address for address in embedded if address is not None]


def _kind(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    kinds = (
        (ip.is_loopback, "a loopback address"),
        (ip.is_link_local, "a link-local address (where cloud metadata services answer)"),
        (ip.is_multicast, "a multicast address"),
        (ip.is_unspecified, "the unspecified address"),
        (ip.is_private, "a private address"),
        (ip.is_reserved, "a reserved address"),
        (not ip.is_global, "not a public address"),
    )
    return next((kind for refused, kind in kinds if refused), None)


# -- the chain: redirects, one request, its reply -----------------------------------------


@dataclass(frozen=True)
class _Hop:
    """One URL of a fetch, checked: where to connect and what to ask for."""

    url: str
    host: str
    port: int
    tls: bool
    target: str


@dataclass(frozen=True)
class _Reply:
    url: str
    headers: http.client.HTTPMessage
    data: bytes = b""
    location: str | None = None


def _follow_redirects(
    source: str, settings: FetchSettings, deadline: float, resolve: Resolver
) -> _Reply:
    """The final reply for ``source``, each redirect's URL checked as the first was."""
    url = _without_fragment(source)
    seen = [url]
    for _ in range(settings.max_redirects + 1):
        reply = _request(source, _hop(source, url), settings, deadline, resolve)
        if reply.location is None:
            return reply
        url = _without_fragment(urljoin(url, reply.location))
        if url in seen:
            chain = " -> ".join([*seen[seen.index(url) :], url])
            raise UnreadableFile(source, f"redirects in a loop ({chain}); check the URL")
        seen.append(url)
    raise LoadLimitExceeded(
        source,
        f"redirected more than {settings.max_redirects} times (fetch.max_redirects), last"
        f" to {url}; raise fetch.max_redirects, or add the page's final URL",
        setting="fetch.max_redirects",
    )


def _hop(source: str, url: str) -> _Hop:
    """``url`` checked (http or https, a host, no credentials) and taken apart."""
    subject = _subject(source, url, "is")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        kind = f"a URL of the {scheme!r} scheme" if scheme else "not an absolute URL"
        raise UnsupportedFileType(
            source, f"{subject} {kind}; tether fetches http:// and https:// URLs only"
        )
    if parts.username is not None or parts.password is not None:
        raise UnreadableFile(
            source,
            f"{subject} a URL with credentials (user:password@); tether neither sends nor"
            " stores them. Use a URL without them",
        )
    try:
        host, port = parts.hostname, parts.port
        if host and not host.isascii():
            host = host.encode("idna").decode("ascii")
    except (ValueError, UnicodeError) as exc:
        raise UnreadableFile(source, f"{subject} not a valid URL ({exc})") from exc
    if not host:
        raise UnreadableFile(source, f"{subject} not a valid URL (it names no host)")
    target = quote(parts.path or "/", safe="/%:@!$&'()*+,;=~")
    if parts.query:
        target += "?" + quote(parts.query, safe="/%:@!$&'()*+,;=~?")
    return _Hop(url, host, port or SCHEMES[scheme], scheme == "https", target)


def _subject(source: str, url: str, verb: str) -> str:
    """How a message about ``url`` starts: ``verb`` when it is ``source``, else where a
    redirect led first."""
    if url == _without_fragment(source):
        return verb
    return f"was redirected to {url}, which {verb}"


def _request(
    source: str, hop: _Hop, settings: FetchSettings, deadline: float, resolve: Resolver
) -> _Reply:
    """One GET of ``hop``, to an address ``resolve`` checked."""
    try:
        addresses = _resolve_in_time(resolve, hop.url, settings.allow_private, deadline)
    except UnreadableFile as exc:
        if hop.url == _without_fragment(source):
            raise UnreadableFile(source, exc.reason) from exc
        raise UnreadableFile(source, f"was redirected to {hop.url}: {exc.reason}") from exc
    proxy = Proxy.parse(settings.proxy) if settings.proxy else None
    connection = connect(Target(hop.host, hop.port, hop.tls), addresses, deadline, proxy)
    headers = _headers(settings)
    target = hop.target
    if proxy is not None and not hop.tls:  # the proxy is asked for the absolute URL
        target = _absolute(hop)
        if proxy.authorization:
            headers["Proxy-Authorization"] = proxy.authorization
    try:
        connection.request("GET", target, headers=headers)
        response = connection.getresponse()
        try:
            return _reply(source, hop, response, settings)
        finally:
            response.close()
    finally:
        connection.close()


def _absolute(hop: _Hop) -> str:
    """``hop``'s URL as a proxy is asked for it (its host checked, its target quoted)."""
    host = f"[{hop.host}]" if ":" in hop.host else hop.host
    port = "" if hop.port == SCHEMES["http"] else f":{hop.port}"
    return f"http://{host}{port}{hop.target}"


def _headers(settings: FetchSettings) -> dict[str, str]:
    return {
        "User-Agent": settings.user_agent,
        "Accept": "text/html,application/xhtml+xml,text/*;q=0.9,*/*;q=0.8",
        "Accept-Encoding": "gzip, deflate",
        "Connection": "close",
    }


def _reply(
    source: str, hop: _Hop, response: http.client.HTTPResponse, settings: FetchSettings
) -> _Reply:
    """``response`` judged, and its body read when it is a page tether can read."""
    status = response.status
    answered = f"{_subject(source, hop.url, 'answered')} HTTP {status} {response.reason}"
    if status in REDIRECTS:
        location = response.getheader("Location")
        if not location:
            raise UnreadableFile(source, f"{answered.rstrip()} with no Location to go to")
        return _Reply(hop.url, response.headers, location=location.strip())
    if status >= 400:
        advice = "check the URL" if status < 500 else "the server failed; try again later"
        raise UnreadableFile(source, f"{answered.rstrip()}; {advice}")
    if not 200 <= status < 300:
        raise UnreadableFile(source, f"{answered.rstrip()}, which is not a page")
    _check_readable(source, _media_type(response.headers))
    decoder = _decoder(source, response.headers)
    if response.length is not None and response.length > settings.max_bytes:
        size = byte_size(response.length)
        raise _too_large(source, f"is {size} (its Content-Length)", settings)
    return _Reply(hop.url, response.headers, _read_body(source, response, decoder, settings))


def _too_large(source: str, what: str, settings: FetchSettings) -> LoadLimitExceeded:
    return LoadLimitExceeded(
        source,
        f"{what}; fetch.max_bytes is {byte_size(settings.max_bytes)}. Raise fetch.max_bytes"
        " to fetch it",
        setting="fetch.max_bytes",
    )


# -- the body -----------------------------------------------------------------------------


def _decoder(source: str, headers: http.client.HTTPMessage) -> zlib._Decompress | None:
    """What undoes the body's Content-Encoding (gzip or deflate), None for none."""
    encoding = (headers.get("Content-Encoding") or "identity").strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj(zlib.MAX_WBITS)
    raise UnreadableFile(
        source,
        f"was sent with content encoding {encoding!r}, which tether does not decode (it"
        " asks for gzip or deflate); the server ignored that",
    )


def _read_body(
    source: str,
    response: http.client.HTTPResponse,
    decoder: zlib._Decompress | None,
    settings: FetchSettings,
) -> bytes:
    """The body, decoded; stopped as soon as more than ``fetch.max_bytes`` arrived or
    came out of the decoder (a small gzip bomb fails at the limit, not at its size)."""
    limit = settings.max_bytes
    body = bytearray()
    received = 0
    while chunk := response.read1(_CHUNK):
        received += len(chunk)
        if received > limit:
            raise _too_large(source, f"is more than {byte_size(limit)}", settings)
        if decoder is not None:
            chunk = _inflate(source, decoder, chunk, limit - len(body), settings)
        body += chunk
        if len(body) > limit:
            raise _too_large(source, f"is more than {byte_size(limit)}", settings)
    if decoder is not None and not decoder.eof:
        raise UnreadableFile(source, "its compressed body ended early (a cut connection?)")
    return bytes(body)


def _inflate(
    source: str, decoder: zlib._Decompress, chunk: bytes, room: int, settings: FetchSettings
) -> bytes:
    """``chunk`` decompressed, never more than ``room`` bytes (plus the one that shows
    the limit was passed)."""
    try:
        out = decoder.decompress(chunk, room + 1)
    except zlib.error as exc:
        raise UnreadableFile(source, f"its compressed body is damaged ({exc})") from exc
    if len(out) > room:
        limit = byte_size(settings.max_bytes)
        raise _too_large(source, f"decompresses to more than {limit}", settings)
    return out


# -- types and names ----------------------------------------------------------------------


def _media_type(headers: http.client.HTTPMessage) -> str:
    """The Content-Type without its parameters, lowercase; generic when it says none."""
    raw = (headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
    return raw if "/" in raw else "application/octet-stream"


def _check_readable(source: str, mime: str) -> None:
    if mime not in GENERIC_TYPES and _extension_for(mime) is None:
        known = sorted({f.mime for f in FORMATS} | {"text/*", XHTML})
        raise UnsupportedFileType(
            source, f"is {mime}, which tether cannot read; it reads {', '.join(known)}"
        )


def _extension_for(mime: str) -> str | None:
    """The extension tether reads a ``mime`` file by: the formats table's (its first
    format of that type), else the standard library's when the table reads it (image/png
    for the table's image/*, text/x-python for source code), else .txt for any text."""
    for found in FORMATS:
        if found.mime == mime:
            return found.extensions[0]
    if mime == XHTML:
        return ".xhtml"
    guessed = _standard_types().guess_extension(mime)
    if guessed and by_extension(f"name{guessed}") is not None:
        return guessed
    return ".txt" if mime.startswith("text/") else None


@cache
def _standard_types() -> mimetypes.MimeTypes:
    """The standard library's built-in types, without the machine's own files."""
    return mimetypes.MimeTypes()


def _filename(source: str, url: str, mime: str, data: bytes) -> str:
    """A name for the page: its URL's last segment (else its host), with the extension
    its type names. A generic type keeps the URL's extension when tether reads it, else
    takes the one its content shows; text/plain keeps a text format's extension (a
    README.md served as text/plain is still Markdown)."""
    path = PurePosixPath(unquote(urlsplit(url).path))
    stem = re.sub(r"[^\w.-]+", "-", path.stem).strip(".-")[:80] or _host_stem(url)
    named = by_extension(path.name) if path.suffix else None
    if mime in GENERIC_TYPES:
        found = named or sniff(data)
        if found is None:
            raise UnsupportedFileType(
                source,
                f"is {mime}, its URL names no format tether reads and its content is none"
                " it recognises",
            )
        extension = path.suffix.lower() if named else found.extensions[0]
    elif mime == "text/plain" and named is not None and named.mime.startswith("text/"):
        extension = path.suffix.lower()
    else:
        extension = _extension_for(mime) or ".txt"
    return stem + extension


def _host_stem(url: str) -> str:
    return re.sub(r"[^\w.-]+", "-", urlsplit(url).hostname or "page").strip(".-") or "page"


def _without_fragment(url: str) -> str:
    return urlunsplit(urlsplit(url.strip())._replace(fragment=""))


# -- the lookup ---------------------------------------------------------------------------


def _resolve_in_time(
    resolve: Resolver, url: str, allow_private: bool, deadline: float
) -> list[str]:
    """``resolve(url)``, given only the time left: a lookup has no timeout of its own,
    so it runs in a thread that is abandoned at the deadline."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tether-fetch-resolve")
    try:
        future = pool.submit(resolve, url, allow_private=allow_private)
        return future.result(timeout=time_left(deadline))
    finally:
        pool.shutdown(wait=False)
