"""``python -m coordinator.cli``: the same as the ``fanout`` console script."""

import sys

from coordinator.cli.main import main

sys.exit(main())
