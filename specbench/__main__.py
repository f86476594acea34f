"""`python -m specbench`: the same command as `specbench`."""

from specbench.cli import main

main(prog_name="specbench")
