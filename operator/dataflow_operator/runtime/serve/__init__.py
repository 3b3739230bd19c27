"""The replica's control API: HTTP + JSON on ``host:port`` (default port 8765), on aiohttp.

The operator (and a human with curl or ``dataflow-operator subscribe``/``peek``) talks to
a running replica through these endpoints; JSON bodies are the versioned models of
:mod:`dataflow_operator.api.protocol`:

=================================  ===========================================================
``GET /status``                    :class:`ReplicaReport` (cheap; poll it every second)
``PUT /dataflows``                 :class:`DesiredDataflows` → :class:`InstallResult`
``GET /dataflows/{name}/peek``     :class:`PeekResult` of an Index dataflow; with
                                   ``?format=lines`` its rows as ``TIME<TAB>COUNT<TAB>col…``
``GET /dataflows/{name}/subscribe``  the dataflow's changelog as a chunked stream of lines
                                   ``TIME<TAB>DIFF<TAB>col…`` (``?asOf=T&snapshot=&progress=``;
                                   see :mod:`~dataflow_operator.runtime.serve.stream`)
``GET /healthz``                   200 while the process serves
``GET /readyz``                    200 once the replica is ready, else 503
``GET /metrics``                   Prometheus text (:mod:`dataflow_operator.runtime.serve.metrics`)
=================================  ===========================================================

Every error is an :class:`ErrorBody`: 400 for malformed JSON, a body that does not
validate, a bad query parameter, or a missing or other protocol ``version`` (also when a
GET names another version in ``?version=`` or the ``X-Dataflow-Protocol-Version`` header);
401 without the replica's token when it has one
(:mod:`~dataflow_operator.runtime.serve.auth`; the probes and ``/metrics`` stay open);
404 for an unknown dataflow or path; 405 for a wrong method; 409 when peeking a dataflow
that is not an Index; 411 without Content-Length; 413 for a body over 16 MiB; 503
``NotReady`` for what needs the engine while the replica starts (retry); 500 when the
service fails.

Modules: :mod:`.server` (the thread and loop), :mod:`.routes` (one handler per
endpoint), :mod:`.errors`, :mod:`.auth`, :mod:`.stream` (the subscribe endpoint) and
:mod:`.changes` (a changelog store read as time-ordered lines, pure of HTTP).
"""

from dataflow_operator.runtime.serve.auth import read_token
from dataflow_operator.runtime.serve.errors import VERSION_HEADER
from dataflow_operator.runtime.serve.routes import MAX_BODY_BYTES
from dataflow_operator.runtime.serve.server import ControlServer, parse_address
from dataflow_operator.runtime.serve.stream import StreamLimits

__all__ = [
    "MAX_BODY_BYTES",
    "VERSION_HEADER",
    "ControlServer",
    "StreamLimits",
    "parse_address",
    "read_token",
]
