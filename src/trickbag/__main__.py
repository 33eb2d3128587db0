"""``python -m trickbag`` runs the command line."""

import sys

from trickbag.cli import main

sys.exit(main())
