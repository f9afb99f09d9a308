"""`python -m memory.admin`: the operator's command line (see `cli`); the arguments are
parsed before the store and Mem0 are loaded (`args.main`)."""

from memory.admin.args import main

raise SystemExit(main())
