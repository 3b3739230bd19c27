"""``python -m dataflow_operator``."""

import sys

from dataflow_operator.cli import main

sys.exit(main())
