"""``python -m tests.upstream``: see :mod:`tests.upstream.runner`."""

import sys

from tests.upstream.runner import main

sys.exit(main())
