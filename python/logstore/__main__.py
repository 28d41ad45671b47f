"""``python -m logstore``: the same as the ``logstore`` console script."""

import sys

from logstore.cli import main

sys.exit(main())
