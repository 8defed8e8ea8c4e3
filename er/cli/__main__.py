"""``python -m er.cli``: the same as the ``er`` command."""

import sys

from er.cli.main import main

sys.exit(main())
