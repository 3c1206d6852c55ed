"""`python -m parley` is the `parley` command."""

import sys

from parley.entry import main

sys.exit(main())
