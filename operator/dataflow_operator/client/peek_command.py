"""``dataflow-operator peek NAME``: print an Index dataflow's current contents.

One line per distinct row, ``TIME<TAB>COUNT<TAB>col…`` at the latest complete time: the
lines ``subscribe`` starts with, formatted by the replica as ``run`` formats a
Subscribe. A failure prints one line on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import sys

import urllib3

from dataflow_operator.client.connect import add_arguments, open_endpoint
from dataflow_operator.client.control_http import ClientError

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``peek``."""
    add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Print the Index's rows."""
    try:
        response = open_endpoint(args, "peek", {"format": "lines"})
        sys.stdout.write(response.data.decode())
    except ClientError as error:
        print(f"peek: {error}", file=sys.stderr)
        return 1
    except (urllib3.exceptions.HTTPError, OSError) as error:
        print(f"peek: reading the answer failed: {error}", file=sys.stderr)
        return 1
    return 0
