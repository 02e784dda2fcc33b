"""The ``strata`` command the wheel installs: the same command line as the binary built from
the repository (``strata demo``, ``strata mcp``, ``strata ingest``, ...), run by the native
module in this process."""

import sys

from strata import _strata


def main() -> None:
    sys.exit(_strata.run_cli(sys.argv))


if __name__ == "__main__":
    main()
