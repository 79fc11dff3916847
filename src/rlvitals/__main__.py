from rlvitals.cli import main

raise SystemExit(main())
