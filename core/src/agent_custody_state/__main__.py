"""``python -m agent_custody_state``: the ``agent-custody-memory`` command line."""

import sys

from agent_custody_state.cli import main

sys.exit(main())
