from paradit.backend.tools.cli import main

raise SystemExit(main())
