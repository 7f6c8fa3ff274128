"""The connection of one fetch (:mod:`tether.ingest.web`): to an address already checked,
or through the proxy ``fetch.proxy`` names, with every send and receive bounded by the
fetch's deadline.

Without a proxy the socket goes to the checked address and the URL's host is only the
Host header and, over TLS, the SNI name the certificate must match. Through a proxy, an
``http`` page is asked of the proxy by its absolute URL, and an ``https`` one through a
``CONNECT`` tunnel, with TLS end to end (the proxy sees the host name, not the page).
"""

from __future__ import annotations

import base64
import http.client
import io
import socket
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

#: The most bytes of a proxy's answer to CONNECT read before the tunnel is refused.
_MAX_TUNNEL_REPLY = 64 * 2**10


def time_left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the fetch ran out of time")
    return left


@dataclass(frozen=True)
class Proxy:
    """An HTTP proxy (``fetch.proxy``): where it listens, and the credentials of its URL
    as a ``Proxy-Authorization`` header value (Basic), when it has any."""

    host: str
    port: int
    authorization: str | None = None

    @classmethod
    def parse(cls, url: str) -> Proxy:
        """``http://[user:password@]host[:port]`` (port 80 when it names none)."""
        parts = urlsplit(url)
        if parts.scheme.lower() != "http" or not parts.hostname:
            raise ValueError(f"a proxy is an http://host:port URL, not {url!r}")
        authorization = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            authorization = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        return cls(parts.hostname, parts.port or 80, authorization)


@dataclass(frozen=True)
class Target:
    """What one request asks for: the host and port of its URL, and whether over TLS."""

    host: str
    port: int
    tls: bool


def connect(
    target: Target, addresses: Sequence[str], deadline: float, proxy: Proxy | None = None
) -> PinnedConnection:
    """A connection for ``target``: to the first of ``addresses`` that answers, or to
    ``proxy`` (tunnelled for TLS)."""
    if proxy is not None:
        connection = PinnedConnection(target, proxy.host, deadline, proxy)
        try:
            connection.connect()
        except BaseException:
            connection.close()
            raise
        return connection
    failure: OSError = OSError(f"no address to connect to for {target.host}")
    for address in addresses:
        connection = PinnedConnection(target, address, deadline)
        try:
            connection.connect()
        except OSError as exc:
            connection.close()
            failure = exc
        else:
            return connection
    raise failure


class PinnedConnection(http.client.HTTPConnection):
    """HTTP, or HTTPS, to one checked ``address`` (or through ``proxy``): the URL's host
    is only the Host header and, over TLS, the SNI name the certificate must match, so no
    lookup happens between the address's check and the connection."""

    def __init__(
        self, target: Target, address: str, deadline: float, proxy: Proxy | None = None
    ) -> None:
        super().__init__(target.host, target.port, timeout=time_left(deadline))
        self.address = address
        self.deadline = deadline
        self.proxy = proxy
        self.tls = ssl.create_default_context() if target.tls else None
        # The Host header names the port only when it is not the scheme's own.
        self.default_port = 443 if target.tls else 80

    def connect(self) -> None:
        port = self.proxy.port if self.proxy is not None else self.port
        sock = socket.create_connection((self.address, port), time_left(self.deadline))
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.proxy is not None and self.tls is not None:
                self._tunnel_through(sock, self.proxy)
            if self.tls is not None:
                sock.settimeout(time_left(self.deadline))
                sock = self.tls.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        self.sock = DeadlineSocket(sock, self.deadline)

    def _tunnel_through(self, sock: socket.socket, proxy: Proxy) -> None:
        """Ask ``proxy`` for a tunnel to the target (``CONNECT host:port``); an answer
        other than 2xx is an OSError naming the proxy's status."""
        where = f"{self.host}:{self.port}"
        lines = [f"CONNECT {where} HTTP/1.1", f"Host: {where}"]
        if proxy.authorization:
            lines.append(f"Proxy-Authorization: {proxy.authorization}")
        sock.settimeout(time_left(self.deadline))
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("ascii"))
        reply = b""
        while b"\r\n\r\n" not in reply:
            sock.settimeout(time_left(self.deadline))
            piece = sock.recv(4096)
            if not piece or len(reply) > _MAX_TUNNEL_REPLY:
                raise OSError(f"the proxy {proxy.host}:{proxy.port} gave no tunnel")
            reply += piece
        status = reply.split(b"\r\n", 1)[0].decode("latin-1").strip()
        code = status.split(" ", 2)[1] if status.count(" ") >= 1 else ""
        if not code.startswith("2"):
            raise OSError(f"the proxy {proxy.host}:{proxy.port} refused the tunnel ({status})")


class DeadlineSocket:
    """A connected socket whose every send and receive gets only the time left before
    the deadline: a server that trickles bytes cannot stretch a fetch past it. It has
    what :mod:`http.client` uses of a socket: ``sendall``, ``makefile`` and ``close``;
    like a socket, it stays open while a file made from it is (http.client closes the
    connection once the response has it)."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline
        self.readers = 0
        self.closed = False

    def arm(self) -> None:
        self.sock.settimeout(time_left(self.deadline))

    def sendall(self, data: bytes) -> None:
        self.arm()
        self.sock.sendall(data)

    def makefile(self, mode: str = "rb") -> io.BufferedReader:
        self.readers += 1
        return io.BufferedReader(_DeadlineReader(self))

    def close(self) -> None:
        self.closed = True
        self.release(0)

    def release(self, readers: int = 1) -> None:
        self.readers -= readers
        if self.closed and self.readers == 0:
            self.sock.close()


class _DeadlineReader(io.RawIOBase):
    def __init__(self, sock: DeadlineSocket) -> None:
        self.sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        self.sock.arm()
        return self.sock.sock.recv_into(buffer)

    def close(self) -> None:
        if not self.closed:
            self.sock.release()
        super().close()
