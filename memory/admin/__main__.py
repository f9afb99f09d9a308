from memory.admin.cli import main

raise SystemExit(main())
