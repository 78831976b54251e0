"""``python -m braid_acl_sim``: the ``braid-acl-sim`` command."""

import sys

from .cli import main

sys.exit(main())
