"""The names a replica's driver is given that become paths: the Replica's (the default
state directory ``…/dataflow-replica/<replica>``), the attempt's number and the state a
make-before-break successor keeps (``attempts/N``). Each is checked before it is used."""

from __future__ import annotations

import re
from collections.abc import Mapping

from dataflow_operator.api import injection
from dataflow_operator.core.names import replica_name_problem

__all__ = ["attempt_names"]


def attempt_names(flag: str | None, env: Mapping[str, str]) -> tuple[str, str | None, str | None]:
    """``(replica, attempt, keep_state)`` from ``--replica`` and the injected environment.

    Raises ValueError with one line naming the flag or variable: a Replica name that is
    not one (:func:`~dataflow_operator.core.names.replica_name_problem`), an attempt that
    is not a number, a kept state that is not ``''`` or ``attempts/N``.
    """
    replica = "local"
    for source, name in (
        ("--replica", flag),
        (injection.ENV_REPLICA, env.get(injection.ENV_REPLICA)),
    ):
        if name:
            problem = replica_name_problem(name)
            if problem is not None:
                raise ValueError(f"{source}: {problem}")
            replica = name
            break
    attempt = env.get(injection.ENV_ATTEMPT) or None
    if attempt is not None and not attempt.isdecimal():
        raise ValueError(f"{injection.ENV_ATTEMPT} {attempt!r}: not an attempt number")
    keep_state = env.get(injection.ENV_STATE_KEEP)
    if keep_state is not None and not re.fullmatch(injection.STATE_DIR_PATTERN, keep_state):
        raise ValueError(
            f"{injection.ENV_STATE_KEEP} {keep_state!r}: not '' or "
            f"'{injection.STATE_ATTEMPTS_DIR}/N' (a state directory below the location)"
        )
    return replica, attempt, keep_state
