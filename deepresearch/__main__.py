"""`python -m deepresearch` runs the CLI."""

from deepresearch.cli.main import run

if __name__ == "__main__":
    run()
