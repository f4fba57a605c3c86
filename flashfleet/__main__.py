import sys

from flashfleet.cli import main

sys.exit(main())
