"""`python -m seqjax.cli`: the `seqjax` executable."""

import sys

from seqjax.cli import entry

sys.exit(entry())
