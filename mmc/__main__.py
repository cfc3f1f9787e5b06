import sys

from mmc.cli import main

sys.exit(main())
