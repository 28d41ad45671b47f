"""``python -m logstore.cli``: the same as ``python -m logstore`` and the ``logstore`` script."""

import sys

from logstore.cli import main

sys.exit(main())
