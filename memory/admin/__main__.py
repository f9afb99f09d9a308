"""`python -m memory.admin`: the operator's command line (see `cli`); the arguments are
parsed before the store and Mem0 are loaded."""

from memory.admin import main

raise SystemExit(main())
