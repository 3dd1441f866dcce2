"""`python -m amd.cli`: the `amd` command."""

import sys

from amd.cli import main

sys.exit(main())
