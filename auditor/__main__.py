"""`python -m auditor` runs the command-line interface."""

from auditor.entry import main

main()
