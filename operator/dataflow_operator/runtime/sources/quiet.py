"""Whether a source has anything new, looked at from the driver without reading it.

The engine asks before a step (:mod:`dataflow_operator.runtime.engine.quiet`): when no
source of a dataflow has new input, its batch would carry nothing but the clock, and the
engine moves its frontier without one. :func:`quiet_upper` answers for one source from
the offset of the dataflow's last batch, with the reader's own rules
(:mod:`.reader`) but without its side effects: it logs nothing and writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dataflow_operator.core.time import Timestamp
from dataflow_operator.runtime.changelog_store import ChangelogStore
from dataflow_operator.runtime.sources.changelog_times import progress_upper
from dataflow_operator.runtime.sources.logs import TABLE_SUFFIX, list_data_files, read_listing
from dataflow_operator.runtime.sources.options import SourceOptions

__all__ = ["quiet_upper"]


def quiet_upper(options: SourceOptions, offset: Mapping[str, Any], now: Timestamp) -> int | None:
    """The upper the source's next batch would reach at clock time ``now`` with nothing new
    to read, or ``None`` when it has (or may have) something new.

    ``offset`` is the source's offset in the dataflow's last batch. New is: a file in a
    ``table``'s, ``files``' or ``changelog``'s directory that its reader has not taken
    (listed or not), a batch of the upstream dataflow it has not read, a changelog
    producer's upper or the clock minus its lateness past what it read. A ``kafka``
    source is always ``None``: only a fetch tells whether its topic has new records.
    """
    kind = options.kind
    upper = int(offset.get("upper", 0))
    if kind == "dataflow":
        recorded = ChangelogStore(options.path).read_upper()
        if recorded is None:
            return upper
        if recorded.batch > int(offset.get("seq", -1)):
            return None
        return max(upper, recorded.upper)
    if kind not in ("table", "files", "changelog"):
        return None
    if _unread_files(options, int(offset.get("seq", 0))):
        return None
    if kind != "changelog":
        return max(upper, now + 1)
    progress = progress_upper(options, now)
    if progress is not None and progress > upper:
        return None  # its producer's upper or the clock minus its lateness moved it
    return upper


def _unread_files(options: SourceOptions, taken: int) -> bool:
    """True when the source's directory has a data file its reader has not taken."""
    logged = [name for name, _ in read_listing(options.log_dir)]
    if len(logged) > taken:
        return True
    known = set(logged)
    for name in list_data_files(options.path):
        if options.kind == "table" and not name.lower().endswith(TABLE_SUFFIX):
            continue  # a table's other files are never read (its reader skips them)
        if name not in known:
            return True
    return False
