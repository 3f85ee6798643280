"""`rollout-graph view` turns Nagle's algorithm off on the server's connections (views/serve.py
``no_delay``): Streamlit binds its listening socket with protocol 0, so asyncio left Nagle on, and
each response or websocket message written in two parts waited for the browser's delayed
acknowledgement (about 40 ms per request on a kept-alive connection). These tests check the socket
options the server's connections get, through the same asyncio server Streamlit runs on them."""

from __future__ import annotations

import asyncio
import socket

import pytest

from rollout_graph.ui import serve

starlette_server = pytest.importorskip("streamlit.web.server.starlette.starlette_server")


def _accepted_no_delay(sock: socket.socket) -> int:
    """TCP_NODELAY of a connection that an asyncio server on ``sock`` accepts (as uvicorn does)."""
    seen: list[int] = []

    class Probe(asyncio.Protocol):
        def connection_made(self, transport) -> None:  # type: ignore[override]
            accepted = transport.get_extra_info("socket")
            seen.append(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    async def run() -> None:
        server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            for _ in range(200):
                if seen:
                    break
                await asyncio.sleep(0.01)
            writer.close()

    asyncio.run(run())
    assert seen, "no connection was accepted"
    return seen[0]


@pytest.fixture
def original_bind(monkeypatch):
    """Streamlit's own bind, put back after the test (no_delay replaces it in its module)."""
    bind = starlette_server._bind_socket
    monkeypatch.setattr(starlette_server, "_bind_socket", bind)
    return bind


def test_streamlit_alone_leaves_nagle_on_its_connections(original_bind):
    sock = original_bind("127.0.0.1", 0, 8)
    if _accepted_no_delay(sock):
        pytest.skip("this Streamlit turns Nagle off itself: views/serve.py no_delay is no longer needed")
    assert sock.proto != socket.IPPROTO_TCP  # why asyncio did not turn it off


def test_no_delay_turns_nagle_off_on_every_accepted_connection(original_bind):
    assert serve.no_delay()
    assert starlette_server._bind_socket is not original_bind
    assert serve.no_delay()  # a second call does not wrap the wrapper
    assert starlette_server._bind_socket.__wrapped__ is original_bind
    sock = starlette_server._bind_socket("127.0.0.1", 0, 8)
    # the socket Streamlit made, as it made it: listening, non-blocking, inheritable
    assert sock.proto == socket.IPPROTO_TCP
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    assert not sock.getblocking()
    assert sock.get_inheritable()
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
    assert _accepted_no_delay(sock) == 1


def test_a_streamlit_without_that_bind_is_left_as_it_is(monkeypatch):
    monkeypatch.delattr(starlette_server, "_bind_socket")
    assert not serve.no_delay()
    assert not hasattr(starlette_server, "_bind_socket")
