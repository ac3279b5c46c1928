"""A free loopback port, for the tests that start servers and distributed runs."""

import socket


def free_port() -> int:
    """A port nothing listens on now: a fixed one may be held by another run on the machine."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
