import sys

from tracesynth.cli import main

sys.exit(main())
