"""Many calls to a ``MapState`` per round trip to the JVM.

Each call a ``transformWithStateInPandas`` processor makes to its state writes one request
to the state server's socket and waits for the answer: nearly all of a call's time is
waiting (figures in ``bench/RESULTS.md``). The state server answers a socket's requests
in order, so writing many requests before reading their answers costs a fraction of
that a call. :func:`get_values`, :func:`update_values` and
:func:`remove_keys` do that, with the requests Spark's own client builds
(``pyspark.sql.streaming.map_state_client``), :data:`WINDOW` requests at a time.

That cannot deadlock: an update's or removal's answer is a few bytes, so the server never
waits to write one, and keeps reading; a read's request is a key, so the requests of a
window fit in the socket's buffers whatever the server has still to write, and every
answer is read before the next window is written.

A ``MapState`` without Spark's client (another version of pyspark, a test's fake) gets
its calls one by one, through its public methods.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

__all__ = ["WINDOW", "get_values", "remove_keys", "update_values"]

WINDOW = 128
"""Requests written before their answers are read."""

Key = tuple[Any, ...]
Value = tuple[Any, ...]


class _Client:
    """Spark's client of one ``MapState``: builds its requests, reads its answers."""

    def __init__(self, state: Any) -> None:
        self.client = state._mapStateClient
        self.api = self.client._stateful_processor_api_client
        self.name = state._stateName

    def request(self, **call: Any) -> None:
        """Write one ``MapStateCall`` (not flushed)."""
        from pyspark.sql.streaming.proto import StateMessage_pb2 as messages

        map_call = messages.MapStateCall(stateName=self.name, **call)
        variable = messages.StateVariableRequest(mapStateCall=map_call)
        message = messages.StateRequest(stateVariableRequest=variable).SerializeToString()
        # As the client's own _send_proto_message frames it: version 0, length, message.
        self.api.sockfile.write(struct.pack("!ii", 0, len(message)) + message)

    def key(self, key: Key) -> bytes:
        return bytes(self.api._serialize_to_bytes(self.client.user_key_schema, key))

    def value(self, value: Value) -> bytes:
        return bytes(self.api._serialize_to_bytes(self.client.value_schema, value))

    def answers(self, count: int) -> Iterator[bytes]:
        """Flush, then read ``count`` answers in order: each one's value bytes."""
        self.api.sockfile.flush()
        for _ in range(count):
            status, error, value = self.api._receive_proto_message()
            if status != 0:
                raise RuntimeError(f"state store call on {self.name!r} failed: {error}")
            yield value


def _client(state: Any) -> _Client | None:
    try:
        return _Client(state)
    except AttributeError:
        return None


def _windows(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    return (items[i : i + WINDOW] for i in range(0, len(items), WINDOW))


def get_values(state: Any, keys: Sequence[Key]) -> list[Value | None]:
    """``state.getValue(key)`` for each of ``keys``, in order."""
    client = _client(state)
    if client is None:
        return [state.getValue(key) for key in keys]
    from pyspark.sql.streaming.proto import StateMessage_pb2 as messages

    found: list[Value | None] = []
    for window in _windows(keys):
        for key in window:
            client.request(getValue=messages.GetValue(userKey=client.key(key)))
        for value in list(client.answers(len(window))):
            found.append(client.api._deserialize_from_bytes(value) if value else None)
    return found


def update_values(state: Any, items: Sequence[tuple[Key, Value]]) -> None:
    """``state.updateValue(key, value)`` for each of ``items``."""
    client = _client(state)
    if client is None:
        for key, value in items:
            state.updateValue(key, value)
        return
    from pyspark.sql.streaming.proto import StateMessage_pb2 as messages

    for window in _windows(items):
        for key, value in window:
            call = messages.UpdateValue(userKey=client.key(key), value=client.value(value))
            client.request(updateValue=call)
        for _ in client.answers(len(window)):
            pass


def remove_keys(state: Any, keys: Sequence[Key]) -> None:
    """``state.removeKey(key)`` for each of ``keys``."""
    client = _client(state)
    if client is None:
        for key in keys:
            state.removeKey(key)
        return
    from pyspark.sql.streaming.proto import StateMessage_pb2 as messages

    for window in _windows(keys):
        for key in window:
            client.request(removeKey=messages.RemoveKey(userKey=client.key(key)))
        for _ in client.answers(len(window)):
            pass
