import sys

from .reproduce import main

sys.exit(main())
