import sys

from flashtriton.cli import main

sys.exit(main())
