"""A ``helix-dbos worker`` that cannot start says why in one line and exits 1 at once,
before DBOS takes any work, leaving no live lease behind."""

from __future__ import annotations

import socket

import psycopg
from worker_kit import Proc

from helix_dbos._database import libpq_url


def test_a_metrics_port_in_use_is_one_line_and_exit_1_without_a_lease(url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        worker = Proc(url, "worker", "--app", "scale_app:executor", "--executor-id", "metrics-w1",
                      "--metrics-port", str(port))
        code = worker.exit_code(60)

    errors = [line for line in worker.errors if "INFO" not in line]
    assert code == 1, worker.errors
    assert errors == [f"error: cannot serve metrics on 0.0.0.0:{port}: Address already in use"], worker.errors
    assert not any(line.startswith("worker metrics-w1 listening") for line in worker.lines), worker.lines
    with psycopg.connect(libpq_url(url)) as conn:
        states = conn.execute("SELECT state FROM helix.workers WHERE executor_id = 'metrics-w1'").fetchall()
    assert states in ([], [("released",)]), states


def test_a_metrics_host_that_is_no_address_is_one_line_and_exit_1(url: str) -> None:
    worker = Proc(url, "worker", "--app", "scale_app:executor", "--executor-id", "metrics-w2",
                  "--metrics-port", "0", "--metrics-host", "no-such-host.invalid")
    code = worker.exit_code(60)

    errors = [line for line in worker.errors if "INFO" not in line]
    assert code == 1, worker.errors
    assert len(errors) == 1 and errors[0].startswith("error: cannot serve metrics on no-such-host.invalid:0: "), errors
    assert not any(line.startswith("worker metrics-w2 listening") for line in worker.lines), worker.lines
