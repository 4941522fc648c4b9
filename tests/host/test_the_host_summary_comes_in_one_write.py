"""The host summary (polled every 5 s) reaches the console in one write: each `echo` and
command of its script wrote on its own, ~11 SSH packets a poll that the console decrypted and
woke up for on a quiet host (issue 36 item 2). Counted exactly: the script's stdout is a
SOCK_SEQPACKET socket, where every write() is one record."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from console.host.parsers.host import host_summary_script, parse_host_summary


def _records(script: str) -> list[bytes]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        proc = subprocess.Popen(["sh", "-c", script], stdout=theirs, stdin=subprocess.DEVNULL)
        theirs.close()
        records = []
        while True:
            record = ours.recv(1 << 20)
            if not record:
                break
            records.append(record)
        assert proc.wait(30) == 0
        return records
    finally:
        ours.close()


def test_the_host_summary_is_one_write_and_parses_as_before(tmp_path: Path) -> None:
    paths = [str(tmp_path), "/"]
    records = _records(host_summary_script(paths))
    assert len(records) == 1, [r[:40] for r in records]  # before: 11 writes
    summary = parse_host_summary(records[0].decode(), paths)
    assert summary.hostname == socket.gethostname()
    assert summary.cpus is not None and summary.cpus >= 1
    assert summary.load_1m is not None and summary.uptime_s is not None
    assert len(summary.disks) == 2 and summary.disks[0].path == str(tmp_path)
