"""``python -m ttft``: the same as the ``ttft`` command."""

from ttft.cli.main import main

if __name__ == "__main__":
    main()
