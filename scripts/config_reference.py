"""Regenerate the key reference in docs/configuration.md from the config dataclasses (or check it).

    python scripts/config_reference.py           # rewrite the generated block
    python scripts/config_reference.py --check   # exit 1 when it is stale
"""

import sys

from train.commands.config_reference import main

if __name__ == "__main__":
    sys.exit(main())
