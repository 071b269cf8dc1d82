from paradit.backend.cli import main

raise SystemExit(main())
