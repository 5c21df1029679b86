"""``helix-dbos worker --metrics-host`` chooses the address ``--metrics-port`` binds:
every interface by default (Prometheus scrapes from elsewhere), the loopback only with
``--metrics-host 127.0.0.1``. The socket's address is read from the kernel's table of
listening sockets (``/proc/net/tcp``)."""

from __future__ import annotations

import socket

import httpx
import pytest
from worker_kit import Proc, start_worker


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening_addresses(port: int) -> set[str]:
    """The IPv4 addresses with a socket listening on ``port`` (state 0A in /proc/net/tcp)."""
    found = set()
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return found


@pytest.mark.parametrize(("given", "bound"), [((), "0.0.0.0"), (("--metrics-host", "127.0.0.1"), "127.0.0.1")],
                         ids=["default", "loopback"])
def test_the_metrics_port_binds_the_address_given(url: str, procs: list[Proc], given: tuple[str, ...], bound: str) -> None:
    port = free_port()
    worker = start_worker(url, "--metrics-port", str(port), *given)
    procs.append(worker)
    worker.listening()
    assert worker.wait_for("metrics on ") == f"metrics on http://{bound}:{port}/metrics"
    assert listening_addresses(port) == {bound}
    scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert scraped.status_code == 200 and "helix_workers" in scraped.text
