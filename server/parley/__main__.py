"""`python -m parley` is the `parley` command."""

import sys

from parley.cli import main

sys.exit(main())
