"""`python -m memory.web`: the operator's web page and token endpoint (see `server`)."""

from memory.web.server import main

raise SystemExit(main())
