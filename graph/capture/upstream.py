"""The proxy's HTTP/1.1 client to the engine for recorded calls: asyncio streams, a keep-alive pool.

Why: httpx cost the proxy about a third of its CPU per streamed call, and a model call needs only one
POST and a body framed by ``Content-Length``, chunks or the connection's end, handed on as the bytes
of each network read (docs/performance.md, "The capture proxy").

Entry points: :class:`UpstreamClient` (the pool) answers with an :class:`UpstreamResponse`;
:class:`LineSplitter` cuts a stream into lines; :func:`usable` says whether this client can reach the
engine (an engine behind the environment's HTTP proxy, and the unrecorded paths, stay on httpx).
Errors are httpx's types, so the proxy (rollout_graph.capture.server) treats both clients alike;
:class:`UpstreamTooLarge` is an answer over the proxy's bound. The bounds, timeouts and keep-alive:
docs/limits.md, "The capture proxy".
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.request
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx

_READ = 1 << 16
_MAX_HEAD = 1 << 20
_INFLATE = 1 << 20  # the most one decompression step may produce


class UpstreamTooLarge(httpx.DecodingError):
    """The engine's answer (decompressed) or one of its stream events is over the proxy's bound."""


class LineSplitter:
    """A byte stream cut into lines (without their ``\n``), linear in the stream's size.

    A line spread over many reads is kept as its pieces and joined once, when its newline comes
    (:attr:`copied` counts the bytes so joined: never more than the stream's size). A line that
    grows past ``max_line`` bytes raises :class:`UpstreamTooLarge` (the message names ``flag``).
    """

    def __init__(self, max_line: int, flag: str = "capture --max-event-bytes") -> None:
        self.max_line = max_line
        self.flag = flag
        self.pending: list[bytes] = []
        self.pending_size = 0
        self.copied = 0

    def lines(self, piece: bytes) -> Iterator[bytes]:
        """The lines ``piece`` ends (its last, unended part is kept for the next piece)."""
        start = 0
        while (end := piece.find(b"\n", start)) >= 0:
            if self.pending:
                self.pending.append(piece[start:end])
                line = b"".join(self.pending)
                self.copied += len(line)
                self.pending, self.pending_size = [], 0
            else:
                line = piece[start:end]
            start = end + 1
            yield line
        if start < len(piece):
            tail = piece[start:] if start else piece
            self.pending.append(tail)
            self.pending_size += len(tail)
            if self.pending_size > self.max_line:
                raise UpstreamTooLarge(
                    f"one line of the engine's stream is over {self.max_line:,} bytes, the capture proxy's bound "
                    f"({self.flag}); the call failed, nothing more was read"
                )

    def rest(self) -> bytes | None:
        """The last line when the stream ended without its newline (None when it ended on one)."""
        if not self.pending:
            return None
        line = b"".join(self.pending)
        self.pending, self.pending_size = [], 0
        return line


class _Stale(httpx.RemoteProtocolError):
    """A kept connection the engine had closed: not one byte of an answer came (safe to send again)."""


def usable(base_url: str) -> bool:
    """Whether this client can reach ``base_url`` (http/https, no proxy from the environment)."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    proxies = urllib.request.getproxies()
    if parts.scheme in proxies or "all" in proxies:
        return bool(urllib.request.proxy_bypass(parts.hostname))
    return True


class Headers(dict[str, str]):
    """Response headers by lower-case name; a repeated name's values joined by ``", "`` (as httpx).

    ``raw`` keeps the pairs as they came.
    """

    raw: list[tuple[bytes, bytes]]


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = 0.0
    reused: bool = False

    def usable(self, now: float, expiry: float) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof() and now - self.idle_since < expiry

    def close(self) -> None:
        self.writer.close()


@dataclass
class UpstreamResponse:
    """One response: the head read, the body read on demand (:meth:`aread` or :meth:`aiter_bytes`)."""

    status_code: int
    headers: Headers
    _client: UpstreamClient
    _connection: _Connection | None
    _buffer: bytearray
    _framing: str  # "none", "length", "chunked" or "close"
    _length: int = 0
    _keep_alive: bool = True
    _complete: bool = False
    _decoder: zlib._Decompress | None = field(default=None, repr=False)

    async def _fill(self) -> None:
        """One network read into the buffer; the engine's end before the body's is an error."""
        assert self._connection is not None
        data = await self._client._read(self._connection.reader)
        if not data:
            raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")
        self._buffer += data

    async def _raw(self) -> AsyncIterator[bytes]:
        """The body's bytes without their framing, one piece per network read (what it held)."""
        buf = self._buffer
        if self._framing == "none":
            pass
        elif self._framing == "length":
            left = self._length
            while True:
                if buf:
                    take = min(left, len(buf))
                    piece = bytes(buf[:take])
                    del buf[:take]
                    left -= take
                    yield piece
                if left <= 0:
                    break
                await self._fill()
        elif self._framing == "close":
            assert self._connection is not None
            while True:
                if buf:
                    piece = bytes(buf)
                    buf.clear()
                    yield piece
                data = await self._client._read(self._connection.reader)
                if not data:
                    break
                buf += data
        else:
            async for piece in self._chunks():
                yield piece
        self._complete = True
        self._release()

    async def _chunks(self) -> AsyncIterator[bytes]:
        buf = self._buffer
        out: list[bytes] = []
        while True:
            end = buf.find(b"\r\n")
            while end < 0:
                if len(buf) > 4096:
                    raise httpx.RemoteProtocolError("malformed chunked encoding (a chunk size line too long)")
                if out:
                    yield b"".join(out)
                    out = []
                await self._fill()
                end = buf.find(b"\r\n")
            try:
                size = int(bytes(buf[:end]).split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise httpx.RemoteProtocolError("malformed chunked encoding (a chunk size is not hex)") from None
            del buf[: end + 2]
            if size == 0:
                while True:  # trailer lines, up to the empty line
                    end = buf.find(b"\r\n")
                    if end < 0:
                        if len(buf) > _MAX_HEAD:
                            raise httpx.RemoteProtocolError("the engine's chunked trailer is over 1 MB")
                        if out:
                            yield b"".join(out)
                            out = []
                        await self._fill()
                        continue
                    del buf[: end + 2]
                    if end == 0:
                        break
                if out:
                    yield b"".join(out)
                return
            while size > 0:
                if not buf:
                    if out:
                        yield b"".join(out)
                        out = []
                    await self._fill()
                take = min(size, len(buf))
                out.append(bytes(buf[:take]))
                del buf[:take]
                size -= take
            while len(buf) < 2:
                if out:
                    yield b"".join(out)
                    out = []
                await self._fill()
            if buf[:2] != b"\r\n":
                raise httpx.RemoteProtocolError("malformed chunked encoding (no CRLF after a chunk)")
            del buf[:2]
            if not buf and out:  # everything this read brought is handled: hand it on before waiting
                yield b"".join(out)
                out = []

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body, decoded (gzip/deflate if the engine sent it so), a piece per network read
        (a compressed read inflated in pieces of at most :data:`_INFLATE` bytes)."""
        decoder = self._decoder
        try:
            async for piece in self._raw():
                if decoder is None:
                    yield piece
                    continue
                out = decoder.decompress(piece, _INFLATE)
                while True:
                    if out:
                        yield out
                    if not decoder.unconsumed_tail:
                        break
                    out = decoder.decompress(decoder.unconsumed_tail, _INFLATE)
            if decoder is not None:
                tail = decoder.flush()
                if tail:
                    yield tail
        except zlib.error as exc:
            raise httpx.DecodingError(f"cannot decode the engine's body: {exc}") from None

    async def aread(self) -> bytes:
        """The whole body."""
        return b"".join([piece async for piece in self.aiter_bytes()])

    def _release(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self._complete and self._keep_alive and not self._buffer:
            self._client._put(connection)
        else:
            connection.close()

    async def aclose(self) -> None:
        """Done with the response: its connection back to the pool if the body was read, else closed."""
        self._release()


class UpstreamClient:
    """Connections to one engine (``base_url``: scheme, host and port; paths are sent as given)."""

    def __init__(
        self, base_url: str, timeout: float, connect: float = 10.0, keepalive_expiry: float = 2.0, max_idle: int = 200
    ) -> None:
        parts = urlsplit(base_url)
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.tls else 80)
        default_port = self.port == (443 if self.tls else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = (host if default_port else f"{host}:{self.port}").encode("ascii", "replace")
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self.connect = connect
        self.keepalive_expiry = keepalive_expiry
        self.max_idle = max_idle
        self._idle: list[_Connection] = []
        self._ssl: ssl.SSLContext | None = ssl.create_default_context() if self.tls else None

    async def _read(self, reader: asyncio.StreamReader) -> bytes:
        try:
            async with asyncio.timeout(self.timeout):
                return await reader.read(_READ)
        except TimeoutError:
            raise httpx.ReadTimeout(f"no byte from the engine for {self.timeout:g} s") from None
        except (ConnectionError, OSError) as exc:
            raise httpx.ReadError(f"{type(exc).__name__}: {exc}") from None

    def _put(self, connection: _Connection) -> None:
        connection.idle_since = asyncio.get_running_loop().time()
        connection.reused = True
        if len(self._idle) >= self.max_idle:
            connection.close()
        else:
            self._idle.append(connection)

    async def _connection(self) -> _Connection:
        now = asyncio.get_running_loop().time()
        while self._idle:
            connection = self._idle.pop()
            if connection.usable(now, self.keepalive_expiry):
                return connection
            connection.close()
        try:
            async with asyncio.timeout(self.connect):
                reader, writer = await asyncio.open_connection(
                    self.host,
                    self.port,
                    ssl=self._ssl,
                    limit=_MAX_HEAD,
                    server_hostname=self.host if self.tls else None,
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {self.host}:{self.port} took over {self.connect:g} s") from None
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ConnectError(f"{type(exc).__name__}: {exc}") from None
        return _Connection(reader, writer)

    async def send(self, target: str, headers: list[tuple[bytes, bytes]], content: bytes) -> UpstreamResponse:
        """POST ``content`` to ``target`` (a path with its query); the response once its head came."""
        head = [b"POST ", (self.prefix + target).encode("latin-1", "replace"), b" HTTP/1.1\r\nhost: ", self.host_header]
        head.append(b"\r\ncontent-length: %d\r\naccept-encoding: identity\r\n" % len(content))
        for name, value in headers:
            if name.lower() in (b"host", b"content-length", b"accept-encoding", b"transfer-encoding"):
                continue
            head += (name, b": ", value, b"\r\n")
        head.append(b"\r\n")
        message = b"".join(head) + content
        for attempt in (0, 1):
            connection = await self._connection()
            try:
                return await self._exchange(connection, message)
            except _Stale:
                connection.close()
                if not connection.reused or attempt:
                    raise
            except BaseException:
                connection.close()
                raise
        raise AssertionError("unreachable")

    async def _exchange(self, connection: _Connection, message: bytes) -> UpstreamResponse:
        try:
            connection.writer.write(message)
            await connection.writer.drain()
        except (ConnectionError, OSError) as exc:
            raise _Stale(f"the engine closed the connection: {type(exc).__name__}: {exc}") from None
        buf = bytearray()
        while True:
            end = buf.find(b"\r\n\r\n")
            while end < 0:
                if len(buf) > _MAX_HEAD:
                    raise httpx.RemoteProtocolError("the engine's response head is over 1 MB")
                try:
                    data = await self._read(connection.reader)
                except httpx.ReadError as exc:
                    if buf:
                        raise
                    raise _Stale(str(exc)) from None
                if not data:
                    if buf:
                        raise httpx.RemoteProtocolError("the engine closed the connection inside its response head")
                    raise _Stale("server disconnected without sending a response")
                buf += data
                end = buf.find(b"\r\n\r\n", max(0, len(buf) - len(data) - 3))
            if end > _MAX_HEAD:
                raise httpx.RemoteProtocolError("the engine's response head is over 1 MB")
            lines = bytes(buf[:end]).split(b"\r\n")
            del buf[: end + 4]
            status_line = lines[0].split(b" ", 2)
            try:
                version, status = status_line[0], int(status_line[1])
            except (IndexError, ValueError):
                raise httpx.RemoteProtocolError(f"not an HTTP response: {lines[0][:80]!r}") from None
            if 100 <= status < 200 and status != 101:
                continue  # 100 Continue and the like: the real answer follows
            break
        headers = Headers()
        raw = []
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise httpx.RemoteProtocolError(f"malformed response header line: {line[:80]!r}")
            name, value = name.strip(), value.strip()
            raw.append((name, value))
            key, text = name.decode("latin-1").lower(), value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        headers.raw = raw
        connection_header = headers.get("connection", "").lower()
        keep_alive = "close" not in connection_header and (version != b"HTTP/1.0" or "keep-alive" in connection_header)
        response = UpstreamResponse(status, headers, self, connection, buf, "none", _keep_alive=keep_alive)
        if status in (204, 304):
            pass
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            response._framing = "chunked"
        elif "content-length" in headers:
            try:
                response._length = int(headers["content-length"].split(",")[0])
            except ValueError:
                raise httpx.RemoteProtocolError("malformed Content-Length from the engine") from None
            response._framing = "length"
        else:
            response._framing = "close"
            response._keep_alive = False
        encoding = headers.get("content-encoding", "").lower().strip()
        if encoding in ("gzip", "x-gzip"):
            response._decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            response._decoder = zlib.decompressobj()
        elif encoding not in ("", "identity"):
            raise httpx.DecodingError(f"the engine answered in an encoding the proxy does not read: {encoding}")
        return response

    async def aclose(self) -> None:
        """Close the idle connections."""
        while self._idle:
            self._idle.pop().close()
