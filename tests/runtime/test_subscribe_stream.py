"""``GET /dataflows/{name}/subscribe`` over a fake replica whose changelog stores tests write."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.runtime.fake_replica import FakeReplica

from dataflow_operator.api.protocol import DesiredDataflow, DesiredDataflows
from dataflow_operator.runtime.serve import ControlServer, StreamLimits
from dataflow_operator.runtime.serve.changes import CHUNK_BYTES

pytestmark = pytest.mark.timeout(60)


def desired(*names: str, indexes: tuple[str, ...] = ()) -> DesiredDataflows:
    """Subscribe dataflows ``names`` and Index dataflows ``indexes``."""
    kinds = {**dict.fromkeys(names, "Subscribe"), **dict.fromkeys(indexes, "Index")}
    return DesiredDataflows.model_validate(
        {
            "dataflows": [
                DesiredDataflow.model_validate(
                    {"name": n, "spec": {"cluster": "c", "kind": kind, "sql": "SELECT 1 AS x"}}
                )
                for n, kind in kinds.items()
            ]
        }
    )


@pytest.fixture
def replica(tmp_path: Path) -> FakeReplica:
    fake = FakeReplica(tmp_path)
    fake.apply(desired("s"))
    return fake


@pytest.fixture
def server(replica: FakeReplica) -> Iterator[ControlServer]:
    with ControlServer(replica, "127.0.0.1:0") as running:
        yield running


class Stream:
    """A subscribe request read line by line."""

    def __init__(self, server: ControlServer, query: str = "", name: str = "s") -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        self.connection.request("GET", f"/dataflows/{name}/subscribe{query}")
        self.response = self.connection.getresponse()

    def lines(self, count: int) -> list[str]:
        return [self.response.readline().decode().rstrip("\n") for _ in range(count)]

    def rest(self) -> list[str]:
        return self.response.read().decode().splitlines()

    def close(self) -> None:
        self.connection.close()


def test_snapshot_then_updates_in_time_order_once_the_upper_passes_them(
    server: ControlServer, replica: FakeReplica
) -> None:
    replica.write("s", 0, [("a", 100, 1), ("b", 100, 1), ("b", 150, -1)], upper=200)
    stream = Stream(server)
    assert stream.response.status == 200
    assert stream.response.getheader("Content-Type", "").startswith("text/plain")
    assert stream.lines(1) == ["199\t1\ta"]  # the contents at upper - 1; b came and went
    # 'e' at 900 is emitted early (a future time): it waits until the upper passes 900
    replica.write("s", 1, [("e", 900, 1), ("d", 260, 1), ("c", 250, 1)], upper=300)
    assert stream.lines(2) == ["250\t1\tc", "260\t1\td"]
    replica.write("s", 2, [("a", 500, -1)], upper=1000)
    assert stream.lines(2) == ["500\t-1\ta", "900\t1\te"]
    stream.close()


def test_resume_with_as_of_and_no_snapshot_gets_exactly_the_rest(
    server: ControlServer, replica: FakeReplica
) -> None:
    replica.write("s", 0, [("a", 100, 1)], upper=200)
    replica.write("s", 1, [("c", 250, 1), ("e", 900, 1)], upper=300)
    replica.write("s", 2, [("a", 500, -1)], upper=1000)
    everything = Stream(server, "?asOf=0&snapshot=false")
    seen = everything.lines(4)
    everything.close()
    assert seen == ["100\t1\ta", "250\t1\tc", "500\t-1\ta", "900\t1\te"]
    # a client that saw up to 250 resumes there: the rest, nothing repeated
    resumed = Stream(server, "?asOf=250&snapshot=false")
    assert resumed.lines(2) == ["500\t-1\ta", "900\t1\te"]
    resumed.close()
    # with the snapshot: the contents at 250 first
    snap = Stream(server, "?asOf=250")
    assert snap.lines(4) == ["250\t1\ta", "250\t1\tc", "500\t-1\ta", "900\t1\te"]
    snap.close()


def test_a_future_as_of_waits_and_progress_lines_mark_complete_times(
    server: ControlServer, replica: FakeReplica
) -> None:
    replica.write("s", 0, [("a", 100, 1)], upper=200)
    stream = Stream(server, "?asOf=400&progress=true")
    replica.write("s", 1, [], upper=300)  # not yet at 400: nothing
    replica.write("s", 2, [("b", 350, 1), ("c", 450, 1)], upper=500)
    assert stream.lines(4) == ["400\t1\ta", "400\t1\tb", "#progress\t400", "450\t1\tc"]
    assert stream.lines(1) == ["#progress\t499"]
    replica.write("s", 3, [], upper=700)  # no update: still a progress line
    assert stream.lines(1) == ["#progress\t699"]
    stream.close()


def test_bad_parameters_and_unknown_dataflow(server: ControlServer) -> None:
    for query, status, error in [
        ("?asOf=yesterday", 400, "InvalidParameter"),
        ("?snapshot=maybe", 400, "InvalidParameter"),
    ]:
        stream = Stream(server, query)
        assert stream.response.status == status
        assert json.loads(stream.response.read())["error"] == error
        stream.close()
    stream = Stream(server, name="nope")
    assert stream.response.status == 404
    body = json.loads(stream.response.read())
    assert body["error"] == "UnknownDataflow" and "nope" in body["message"]
    stream.close()


def test_a_dropped_dataflow_ends_the_stream_with_its_resume_point(
    server: ControlServer, replica: FakeReplica
) -> None:
    replica.write("s", 0, [("a", 100, 1)], upper=200)
    stream = Stream(server)
    assert stream.lines(1) == ["199\t1\ta"]
    replica.apply(desired())
    replica.completed("s")
    (end,) = stream.rest()
    assert end.startswith("#end\tDataflowDropped\t199\t")
    assert "asOf=199&snapshot=false" in end
    stream.close()


def test_peek_lines_are_the_snapshot_a_subscriber_starts_with(
    tmp_path: Path, server: ControlServer, replica: FakeReplica
) -> None:
    replica.apply(desired("s", indexes=("i",)))
    replica.write("i", 0, [("b", 100, 1), ("a", 120, 1), ("a", 130, 1)], upper=200)
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("GET", "/dataflows/i/peek?format=lines")
    response = connection.getresponse()
    assert response.status == 200
    assert response.read().decode() == "199\t2\ta\n199\t1\tb\n"
    connection.request("GET", "/dataflows/s/peek?format=lines")
    response = connection.getresponse()
    assert (response.status, json.loads(response.read())["error"]) == (409, "NotAnIndex")
    stream = Stream(server, name="i")
    assert stream.lines(2) == ["199\t2\ta", "199\t1\tb"]
    stream.close()


def _read_all(sock: socket.socket) -> bytes:
    data = bytearray()
    while chunk := sock.recv(1 << 16):
        data += chunk
    return bytes(data)


def _unchunk(body: bytes) -> str:
    """The payload of a chunked HTTP body (after the headers)."""
    out = bytearray()
    while body:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out += body[:size]
        body = body[size + 2 :]
    return out.decode()


@pytest.mark.slow
def test_a_slow_subscriber_is_dropped_with_a_message_and_memory_stays_bounded(
    tmp_path: Path, replica: FakeReplica
) -> None:
    padding = "p" * 1000
    times = 200
    for time_ in range(times):  # 200 times x 100 rows x ~1 KB: ~20 MB of lines
        updates = [(f"{time_}-{i}-{padding}", 1000 + time_, 1) for i in range(100)]
        replica.write("s", time_, updates, 1000 + time_ + 1)
    expected = [f"{1000 + t}\t1\t{t}-{i}-{padding}" for t in range(times) for i in range(100)]
    limits = StreamLimits(queue_chunks=2, stall_seconds=0.5, close_seconds=10)
    with ControlServer(replica, "127.0.0.1:0", limits=limits) as server:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        sock.sendall(
            b"GET /dataflows/s/subscribe?asOf=999&snapshot=false HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        deadline = time.monotonic() + 20
        while server.stats.dropped_slow == 0 and time.monotonic() < deadline:
            time.sleep(0.1)  # not reading at all
        assert server.stats.dropped_slow == 1
        raw = _read_all(sock)
        sock.close()
        lines = _unchunk(raw.partition(b"\r\n\r\n")[2]).splitlines()
        end = lines[-1].split("\t")
        assert end[:2] == ["#end", "SlowSubscriber"] and "too slowly" in end[3]
        resume = int(end[2])
        # everything up to the resume time, whole, and nothing after it
        assert lines[:-1] == [line for line in expected if int(line.split("\t")[0]) <= resume]
        assert resume < 1000 + times - 1
        # the queue held at most its chunks, plus the one waiting to enter it (each chunk
        # is cut at the first time boundary past CHUNK_BYTES)
        group = 100 * (len(expected[0]) + 1)
        bound = (limits.queue_chunks + 1) * (CHUNK_BYTES + group)
        assert 0 < server.stats.peak_queued_bytes <= bound
        # resuming where the message says gets exactly the rest
        rest = Stream(server, f"?asOf={resume}&snapshot=false")
        got = rest.lines(len(expected) - len(lines) + 1)
        rest.close()
        assert lines[:-1] + got == expected


def test_an_unreadable_changelog_ends_the_stream_with_a_line(
    server: ControlServer, replica: FakeReplica
) -> None:
    replica.write("s", 0, [("a", 100, 1)], upper=200)
    stream = Stream(server)
    assert stream.lines(1) == ["199\t1\ta"]
    store = replica.changelog("s").store
    store.part(1).write_bytes(b"not parquet")
    store.write(1, None, 300)
    replica.completed("s")
    (end,) = stream.rest()
    assert end.startswith("#end\tReadFailed\t199\treading the changelog failed")
    stream.close()
