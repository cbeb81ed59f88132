"""`python -m oomless ...`: the same as the `oomless` console script."""

from oomless.cli.main import main

if __name__ == "__main__":
    main()
