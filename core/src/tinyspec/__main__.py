"""`python -m tinyspec`: the command-line interface."""
from tinyspec.cli import main

raise SystemExit(main())
