"""``python -m perfsuite.cli``: the same as the ``perfsuite`` command."""

import sys

from perfsuite.cli.main import main

sys.exit(main())
