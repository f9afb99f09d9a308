"""`python -m memory.chat USER`: see `memory.chat.terminal`."""

from memory.chat.terminal import main

raise SystemExit(main())
