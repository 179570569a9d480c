"""``python -m vyre`` runs the ``vyre`` command line."""

import sys

from vyre.cli import main

sys.exit(main())
