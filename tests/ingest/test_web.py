"""Fetching a page by its URL: real HTTP servers on loopback, each misbehaving in one way
(redirect loops, pages over the size limit, a gzip bomb, a server that trickles bytes),
and addresses tether must refuse (loopback, private, link-local, cloud metadata), also
when a redirect leads there from a public host.

The server is on 127.0.0.1, so the tests that fetch from it allow private addresses,
except where the refusal is the point; "public.test" is a name a test resolver maps to
127.0.0.1 while counting it as public (the check is the resolver's, so a test that
replaces it decides what is public)."""

from __future__ import annotations

import base64
import contextlib
import gzip
import http.client
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from pydantic import ValidationError

from helpers import make_pdf
from tether.errors import LoadLimitExceeded, UnreadableFile, UnsupportedFileType
from tether.ingest.formats import format_of
from tether.ingest.web import Fetched, fetch, resolve_address
from tether.settings import FetchSettings

HTML = b"<!doctype html><html><head><title>Guide</title></head><body><h1>Guide</h1></body>"
SMALL_LIMIT = 1000


def fetch_settings(**overrides: object) -> FetchSettings:
    """Settings for the loopback server: private addresses allowed unless overridden."""
    return FetchSettings(**{"allow_private": True, **overrides})


# -- the server ---------------------------------------------------------------------------


class Site:
    """A real HTTP server on 127.0.0.1 with the routes below (HTTPS with ``tls``), and
    what it was asked."""

    def __init__(self, pdf: bytes = b"", bomb: bytes = b"", tls: ssl.SSLContext | None = None):
        self.pdf = pdf
        self.bomb = bomb
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_port
        self.base = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]

    @contextlib.contextmanager
    def serving(self) -> Iterator[Site]:
        with serving(self.server):
            yield self


@contextlib.contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[None]:
    """``server`` answering on a thread of its own until the block ends."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            site.requests.append((self.path, dict(self.headers)))
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            route = next(r for prefix, r in ROUTES if parts.path.startswith(prefix))
            # The client giving up on a slow or large answer is what some tests expect.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                route(self, site, parts.path, query)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


Handler = BaseHTTPRequestHandler
Route = Callable[[Handler, Site, str, dict[str, str]], None]


def send(handler: Handler, status: int, body: bytes = b"", **headers: str) -> None:
    handler.send_response(status)
    for name, value in headers.items():
        handler.send_header(name.replace("_", "-"), value)
    if "Content_Length" not in headers and body:
        handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def page(h: Handler, site: Site, path: str, query: dict[str, str]) -> None:
    send(h, 200, HTML, Content_Type="text/html; charset=UTF-8")


def pdf(h: Handler, site: Site, path: str, query: dict[str, str]) -> None:
    send(h, 200, site.pdf, Content_Type="application/pdf")


def typed(h: Handler, site: Site, path: str, query: dict[str, str]) -> None:
    """Any type: ``?type=...``; a path ending in "blob" holds the start of a PDF, one in
    "binary" bytes of no known format, any other Markdown."""
    body = b"# Notes\n\nhello\n"
    if path.endswith("blob"):
        body = b"%PDF-1.4\n%%EOF\n"
    elif path.endswith("binary"):
        body = bytes(range(256))
    send(h, 200, body, Content_Type=query["type"])


def encoded(h: Handler, site: Site, path: str, query: dict[str, str]) -> None:
    """The page compressed as /encoded/<content-encoding> says (br: not really)."""
    encoding = path.rsplit("/", 1)[1]
    compress = {"gzip": gzip.compress, "deflate": zlib.compress, "br": bytes}[encoding]
    send(h, 200, compress(HTML), Content_Type="text/html", Content_Encoding=encoding)


def echo_host(h: Handler, site: Site, path: str, query: dict[str, str]) -> None:
    send(h, 200, h.headers["Host"].encode(), Content_Type="text/plain")


def redirect(h: Handler, site: Site, path: str, query: dict[str, str]) -> None:
    """/r1 -> /r2 (relative), /r2 -> the page (absolute), /to?url=... -> anywhere."""
    targets = {
        "/r1": "/r2",
        "/r2": f"{site.base}/page.html",
        "/loop-a": "/loop-b",
        "/loop-b": "/loop-a",
    }
    location = query["url"] if path == "/to" else targets[path]
    send(h, 302 if path != "/r2" else 301, Location=location)


def hops(h: Handler, site: Site, path: str, query: dict[str, str]) -> None:
    """/hops/N redirects N times before the page."""
    left = int(path.rsplit("/", 1)[1])
    if left:
        send(h, 307, Location=f"/hops/{left - 1}")
    else:
        page(h, site, path, query)


def big(h: Handler, site: Site, path: str, query: dict[str, str]) -> None:
    """5 kB, with its Content-Length (/big), without (/big-unsized: HTTP/1.0, the body
    ends when the connection does) or chunked (/big-chunked)."""
    body = b"x" * 5 * SMALL_LIMIT
    if path == "/big":
        send(h, 200, body, Content_Type="text/plain")
        return
    if path == "/big-unsized":
        send(h, 200, Content_Type="text/plain")
        h.wfile.write(body)
        return
    h.protocol_version = "HTTP/1.1"
    send(h, 200, Content_Type="text/plain", Transfer_Encoding="chunked")
    for start in range(0, len(body), 500):
        h.wfile.write(b"1f4\r\n" + body[start : start + 500] + b"\r\n")
    h.wfile.write(b"0\r\n\r\n")


def bomb(h: Handler, site: Site, path: str, query: dict[str, str]) -> None:
    send(h, 200, site.bomb, Content_Type="text/plain", Content_Encoding="gzip")


def slow(h: Handler, site: Site, path: str, query: dict[str, str]) -> None:
    """A byte every 50 ms for 5 s: of the body (/slow-body), or of the headers
    (/slow-head, which never ends them)."""
    if path == "/slow-body":
        send(h, 200, Content_Type="text/plain", Content_Length="100")
    else:
        h.wfile.write(b"HTTP/1.0 200 OK\r\nX-Slow: ")
    for _ in range(100):
        h.wfile.write(b"x")
        time.sleep(0.05)


def status(h: Handler, site: Site, path: str, query: dict[str, str]) -> None:
    code = int(path.rsplit("/", 1)[1])
    send(h, code, b"no", Content_Type="text/plain")


ROUTES: list[tuple[str, Route]] = [
    ("/page.html", page),
    ("/reports/", pdf),
    ("/typed/", typed),
    ("/encoded/", encoded),
    ("/echo-host", echo_host),
    ("/r1", redirect),
    ("/r2", redirect),
    ("/loop-", redirect),
    ("/to", redirect),
    ("/hops/", hops),
    ("/big", big),
    ("/bomb", bomb),
    ("/slow-", slow),
    ("/status/", status),
    ("/", typed),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    pdf_path = make_pdf(tmp_path_factory.mktemp("web") / "q3.pdf", ["Revenue grew."])
    compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    megabyte = bytes(2**20)
    bomb = b"".join(compressor.compress(megabyte) for _ in range(100)) + compressor.flush()
    with Site(pdf_path.read_bytes(), bomb).serving() as served:
        yield served


def fails(error: type[Exception], url: str, settings: FetchSettings, **kwargs: object) -> Exception:
    """The error fetching ``url`` raises; it must name the URL as its source."""
    with pytest.raises(error) as caught:
        fetch(url, settings, **kwargs)  # type: ignore[arg-type]
    assert caught.value.source == url  # type: ignore[attr-defined]
    return caught.value


# -- pages --------------------------------------------------------------------------------


def test_an_html_page_is_fetched_with_its_type_charset_and_a_loadable_name(site: Site) -> None:
    fetched = fetch(f"{site.base}/page.html#top", fetch_settings(user_agent="probe/1"))

    assert fetched == Fetched(
        url=f"{site.base}/page.html",
        data=HTML,
        content_type="text/html",
        charset="utf-8",
        fetched_at=fetched.fetched_at,
        filename="page.html",
    )
    assert datetime.fromisoformat(fetched.fetched_at.replace("Z", "+00:00")).tzinfo
    assert site.requests[-1][1]["User-Agent"] == "probe/1"


def test_a_pdf_is_fetched_whole_and_named_for_its_type(site: Site) -> None:
    fetched = fetch(f"{site.base}/reports/q3", fetch_settings())

    assert fetched.data == site.pdf
    assert fetched.content_type == "application/pdf"
    assert fetched.filename == "q3.pdf"
    assert format_of(fetched.filename, fetched.data).name == "PDF"


@pytest.mark.parametrize(
    ("path", "content_type", "filename"),
    [
        ("/typed/notes", "text/plain; charset=utf-8", "notes.txt"),
        ("/typed/notes", "text/markdown", "notes.md"),
        ("/typed/README.md", "text/plain", "README.md"),  # raw files are served so
        (
            "/typed/memo.aspx",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            "memo.docx",
        ),
        ("/typed/page", "application/xhtml+xml", "page.xhtml"),
        ("/typed/scan", "image/png", "scan.png"),
        ("/typed/style", "text/css", "style.css"),
        ("/typed/notes", "text/x-unheard-of", "notes.txt"),
        ("/typed/files/notes.md", "application/octet-stream", "notes.md"),
        ("/typed/blob", "application/octet-stream", "blob.pdf"),
        ("/typed/", "text/html", "typed.html"),
        ("/", "text/html", "127.0.0.1.html"),
    ],
)
def test_the_name_comes_from_the_type_or_for_a_generic_type_from_the_url(
    site: Site, path: str, content_type: str, filename: str
) -> None:
    fetched = fetch(f"{site.base}{path}?type={quote(content_type)}", fetch_settings())

    assert fetched.filename == filename
    assert fetched.content_type == content_type.split(";")[0]


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_compressed_page_is_decoded(site: Site, encoding: str) -> None:
    assert fetch(f"{site.base}/encoded/{encoding}", fetch_settings()).data == HTML


def test_a_content_encoding_tether_cannot_decode_is_refused(site: Site) -> None:
    error = fails(UnreadableFile, f"{site.base}/encoded/br", fetch_settings())

    assert "'br'" in str(error)


@pytest.mark.parametrize("content_type", ["image/gif", "application/zip"])
def test_a_type_tether_cannot_read_is_refused_by_name(site: Site, content_type: str) -> None:
    error = fails(UnsupportedFileType, f"{site.base}/typed/x?type={content_type}", fetch_settings())

    assert content_type in str(error)


def test_a_generic_type_with_no_known_name_or_content_is_refused(site: Site) -> None:
    url = f"{site.base}/typed/binary?type=application/octet-stream"

    error = fails(UnsupportedFileType, url, fetch_settings())

    assert "application/octet-stream" in str(error)


@pytest.mark.parametrize("code", [404, 500])
def test_an_http_error_names_its_status(site: Site, code: int) -> None:
    error = fails(UnreadableFile, f"{site.base}/status/{code}", fetch_settings())

    assert f"HTTP {code}" in str(error)
    assert not isinstance(error, LoadLimitExceeded)


# -- redirects ----------------------------------------------------------------------------


def test_a_redirect_chain_ends_at_the_final_url(site: Site) -> None:
    fetched = fetch(f"{site.base}/r1", fetch_settings())

    assert fetched.url == f"{site.base}/page.html"
    assert fetched.data == HTML


def test_a_redirect_loop_is_an_error(site: Site) -> None:
    error = fails(UnreadableFile, f"{site.base}/loop-a", fetch_settings())

    assert "loop" in str(error)


def test_redirects_are_followed_up_to_max_redirects(site: Site) -> None:
    settings = fetch_settings(max_redirects=2)
    assert fetch(f"{site.base}/hops/2", settings).data == HTML

    error = fails(LoadLimitExceeded, f"{site.base}/hops/3", settings)

    assert error.setting == "fetch.max_redirects"  # type: ignore[attr-defined]


def test_a_redirect_to_another_scheme_is_refused(site: Site) -> None:
    error = fails(UnsupportedFileType, f"{site.base}/to?url=file:///etc/passwd", fetch_settings())

    assert "redirected to file:///etc/passwd" in str(error)


# -- limits -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/big", "/big-unsized", "/big-chunked"])
def test_a_page_over_max_bytes_fails_at_the_limit(site: Site, path: str) -> None:
    error = fails(LoadLimitExceeded, f"{site.base}{path}", fetch_settings(max_bytes=SMALL_LIMIT))

    assert error.setting == "fetch.max_bytes"  # type: ignore[attr-defined]
    assert ("Content-Length" in str(error)) == (path == "/big")


@pytest.mark.parametrize("max_bytes", [2**20, FetchSettings().max_bytes])
def test_a_gzip_bomb_fails_at_max_bytes_of_output(site: Site, max_bytes: int) -> None:
    assert len(site.bomb) < 200_000  # 100 MB of zeros, sent as ~100 kB

    error = fails(LoadLimitExceeded, f"{site.base}/bomb", fetch_settings(max_bytes=max_bytes))

    assert error.setting == "fetch.max_bytes"  # type: ignore[attr-defined]
    assert "decompresses to more than" in str(error)


@pytest.mark.parametrize("path", ["/slow-body", "/slow-head"])
def test_a_server_that_trickles_bytes_is_cut_off_at_the_timeout(site: Site, path: str) -> None:
    started = time.monotonic()

    error = fails(LoadLimitExceeded, f"{site.base}{path}", fetch_settings(timeout=0.5))

    assert error.setting == "fetch.timeout"  # type: ignore[attr-defined]
    assert time.monotonic() - started < 1.5


def test_a_slow_lookup_counts_against_the_timeout() -> None:
    def slow_lookup(url: str, *, allow_private: bool) -> list[str]:
        time.sleep(1.0)
        return ["127.0.0.1"]

    started = time.monotonic()
    error = fails(
        LoadLimitExceeded, "http://slow.test/", fetch_settings(timeout=0.3), resolve=slow_lookup
    )

    assert error.setting == "fetch.timeout"  # type: ignore[attr-defined]
    assert time.monotonic() - started < 0.9


# -- what may be fetched ------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://example.com/notes.txt",
        "data:text/plain,hi",
        "gopher://example.com/",
        "/relative/page.html",
    ],
)
def test_only_http_and_https_are_fetched(url: str) -> None:
    fails(UnsupportedFileType, url, fetch_settings())


@pytest.mark.parametrize("userinfo", ["user:secret@", "user@", ":secret@"])
def test_a_url_with_credentials_is_refused_before_any_request(site: Site, userinfo: str) -> None:
    url = f"http://{userinfo}127.0.0.1:{site.port}/page.html?credentials"
    error = fails(UnreadableFile, url, fetch_settings())

    assert "credentials" in str(error)
    assert "/page.html?credentials" not in site.paths()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "127.1.2.3"])
def test_loopback_is_refused_unless_private_addresses_are_allowed(site: Site, host: str) -> None:
    url = f"http://{host}:{site.port}/page.html?refused={host}"
    error = fails(UnreadableFile, url, fetch_settings(allow_private=False))

    assert "fetch.allow_private" in str(error)
    assert f"/page.html?refused={host}" not in site.paths()


@pytest.mark.parametrize(
    "host",
    [
        "169.254.169.254",  # cloud metadata
        "[::ffff:169.254.169.254]",
        "[::ffff:127.0.0.1]",
        "[::1]",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "100.64.0.1",
        "[fc00::1]",
        "[fe80::1]",
        "224.0.0.1",
        "[ff02::1]",
        "0.0.0.0",
        "[::]",
        "240.0.0.1",
        "[2002:7f00:1::]",  # 6to4 of 127.0.0.1
        "[64:ff9b::a9fe:a9fe]",  # NAT64 of 169.254.169.254
    ],
)
def test_non_public_addresses_are_refused(host: str) -> None:
    error = fails(
        UnreadableFile, f"http://{host}/latest/meta-data/", fetch_settings(allow_private=False)
    )

    assert "fetch.allow_private" in str(error)


@pytest.mark.parametrize("host", ["93.184.216.34", "[2606:4700:4700::1111]"])
def test_public_addresses_pass_the_check(host: str) -> None:
    assert resolve_address(f"http://{host}/", allow_private=False) == [host.strip("[]")]


def public_test(url: str, *, allow_private: bool) -> list[str]:
    """A resolver for which "public.test" is 127.0.0.1 and counts as public."""
    if urlsplit(url).hostname == "public.test":
        return ["127.0.0.1"]
    return resolve_address(url, allow_private=allow_private)


def test_the_checked_address_is_connected_to_with_the_host_named_in_the_request(
    site: Site,
) -> None:
    calls: list[str] = []

    def counting(url: str, *, allow_private: bool) -> list[str]:
        calls.append(url)
        return public_test(url, allow_private=allow_private)

    url = f"http://public.test:{site.port}/echo-host"
    fetched = fetch(url, fetch_settings(allow_private=False), resolve=counting)

    assert fetched.data == f"public.test:{site.port}".encode()
    assert calls == [url]  # one lookup, and the connection went to its answer


def test_a_redirect_from_a_public_host_to_loopback_is_refused(site: Site) -> None:
    url = f"http://public.test:{site.port}/to?url={site.base}/page.html?rebound"
    error = fails(UnreadableFile, url, fetch_settings(allow_private=False), resolve=public_test)

    assert f"redirected to {site.base}/page.html?rebound" in str(error)
    assert "fetch.allow_private" in str(error)
    assert "/page.html?rebound" not in site.paths()


# -- https --------------------------------------------------------------------------------


def make_certificates(folder: Path, host: str) -> tuple[Path, Path, Path]:
    """A test CA's certificate, a certificate for ``host`` it signed, and that
    certificate's key: PEM files in ``folder``."""
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = certificate("tether test CA", ca_key.public_key(), ca_key, ca=True)
    leaf = certificate(host, key.public_key(), ca_key, ca=False)
    files = (folder / "ca.pem", folder / "cert.pem", folder / "key.pem")
    files[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    files[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return files


def certificate(subject: str, public_key: Any, ca_key: Any, *, ca: bool) -> Any:
    """A certificate for ``subject`` (the CA itself when ``ca``, else a server named by
    it) signed by ``ca_key``, valid for a day."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def name(common_name: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

    builder = (
        x509.CertificateBuilder()
        .subject_name(name(subject))
        .issuer_name(name(subject if ca else "tether test CA"))
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(datetime.now(UTC) - timedelta(hours=1))
        .not_valid_after(datetime.now(UTC) + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def test_https_checks_the_certificate_against_the_url_host_not_the_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, cert, key = make_certificates(tmp_path, "public.test")
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))  # the test CA is the one trusted
    server_names: list[str | None] = []
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    tls.sni_callback = lambda sock, name, context: server_names.append(name)

    with Site(tls=tls).serving() as secure:
        url = f"https://public.test:{secure.port}/echo-host"
        fetched = fetch(url, fetch_settings(allow_private=False), resolve=public_test)
        # The same server by its address: the certificate does not name it.
        error = fails(UnreadableFile, f"{secure.base}/echo-host", fetch_settings())

    assert fetched.data == f"public.test:{secure.port}".encode()
    assert server_names[0] == "public.test"
    assert "certificate" in str(error).lower()


# -- through a proxy ----------------------------------------------------------------------


class ForwardProxy:
    """A real HTTP proxy on 127.0.0.1: absolute-URL GETs are forwarded, CONNECT opens a
    tunnel; "public.test" is 127.0.0.1 to it (its own lookup). It records what it was
    asked, and with ``credentials`` answers 407 to a request without them."""

    def __init__(self, credentials: str | None = None) -> None:
        self.asked: list[tuple[str, str, str | None]] = []  # method, target, authorization
        self.credentials = credentials
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    @contextlib.contextmanager
    def serving(self) -> Iterator[ForwardProxy]:
        with serving(self.server):
            yield self

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def allowed(self) -> bool:
                authorization = self.headers.get("Proxy-Authorization")
                proxy.asked.append((self.command, self.path, authorization))
                if proxy.credentials is None or authorization == proxy.credentials:
                    return True
                send(self, 407, b"", Proxy_Authenticate="Basic")
                return False

            def do_GET(self) -> None:
                if not self.allowed():
                    return
                parts = urlsplit(self.path)
                host = "127.0.0.1" if parts.hostname == "public.test" else parts.hostname
                origin = http.client.HTTPConnection(host, parts.port or 80, timeout=5)
                origin.request("GET", parts.path or "/", headers={"Host": parts.netloc})
                answer = origin.getresponse()
                send(
                    self,
                    answer.status,
                    answer.read(),
                    Content_Type=answer.getheader("Content-Type", ""),
                )
                origin.close()

            def do_CONNECT(self) -> None:
                if not self.allowed():
                    return
                name, port = self.path.rsplit(":", 1)
                host = "127.0.0.1" if name == "public.test" else name
                upstream = socket.create_connection((host, int(port)), timeout=5)
                self.send_response(200, "Connection established")
                self.end_headers()
                self.wfile.flush()
                pipe(self.connection, upstream)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


def pipe(client: socket.socket, upstream: socket.socket) -> None:
    """Bytes both ways until either side closes."""

    def copy(source: socket.socket, target: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                target.sendall(data)
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    other = threading.Thread(target=copy, args=(upstream, client), daemon=True)
    other.start()
    copy(client, upstream)
    other.join(timeout=5)
    upstream.close()


def test_an_http_page_is_asked_of_the_proxy_by_its_url(site: Site) -> None:
    with ForwardProxy().serving() as proxy:
        url = f"http://public.test:{site.port}/page.html"
        fetched = fetch(
            url, fetch_settings(allow_private=False, proxy=proxy.url), resolve=public_test
        )
    assert fetched.data == HTML
    assert proxy.asked == [("GET", url, None)]
    assert site.requests[-1][1]["Host"] == f"public.test:{site.port}"


def test_an_https_page_goes_through_a_tunnel_with_tls_to_the_url_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, cert, key = make_certificates(tmp_path, "public.test")
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    with Site(tls=tls).serving() as secure, ForwardProxy().serving() as proxy:
        url = f"https://public.test:{secure.port}/echo-host"
        settings = fetch_settings(allow_private=False, proxy=proxy.url)
        fetched = fetch(url, settings, resolve=public_test)
    assert fetched.data == f"public.test:{secure.port}".encode()
    assert proxy.asked == [("CONNECT", f"public.test:{secure.port}", None)]  # never the page


def test_a_proxy_s_credentials_come_from_its_url(site: Site) -> None:
    expected = "Basic " + base64.b64encode(b"desk:s3cret word").decode()
    with ForwardProxy(credentials=expected).serving() as proxy:
        url = f"http://public.test:{site.port}/page.html"
        with_them = proxy.url.replace("http://", "http://desk:s3cret%20word@")
        fetched = fetch(url, fetch_settings(proxy=with_them), resolve=public_test)
        refused = fails(UnreadableFile, url, fetch_settings(proxy=proxy.url), resolve=public_test)
        tunnel = fails(
            UnreadableFile,
            f"https://public.test:{site.port}/page.html",
            fetch_settings(proxy=proxy.url),
            resolve=public_test,
        )
    assert fetched.data == HTML
    assert "407" in str(refused)
    assert "refused the tunnel" in str(tunnel) and "407" in str(tunnel)


def test_the_url_s_host_is_still_checked_before_the_proxy_is_asked(site: Site) -> None:
    with ForwardProxy().serving() as proxy:
        error = fails(UnreadableFile, f"{site.base}/page.html", FetchSettings(proxy=proxy.url))
    assert "loopback" in str(error)
    assert proxy.asked == []


@pytest.mark.parametrize(
    "proxy", ["socks5://127.0.0.1:1080", "https://proxy:3128", "proxy:3128", "http://p/path"]
)
def test_a_proxy_is_an_http_url_of_a_host(proxy: str) -> None:
    with pytest.raises(ValidationError, match="proxy"):
        FetchSettings(proxy=proxy)
