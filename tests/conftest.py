"""Test-wide guards: nothing in the suite may reach the network (loopback is allowed for the
app and browser tests)."""

from __future__ import annotations

import socket

import pytest

_LOOPBACK = ("127.", "::1", "localhost")


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    real_connect = socket.socket.connect

    def guarded(sock, address):
        host = address[0] if isinstance(address, tuple) else str(address)
        if sock.family == socket.AF_UNIX or str(host).startswith(_LOOPBACK):
            return real_connect(sock, address)
        raise AssertionError(f"test tried to reach the network: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", guarded)
