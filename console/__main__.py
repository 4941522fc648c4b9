from console.cli.main import main

raise SystemExit(main())
