"""`python -m sglang.launch_server` on the simulated host.

`--help` prints SGLang 0.5.23's real option list (the same argparse table the console ships), so
the console's "read the host's own flags" path runs for real. Otherwise it stays up until
SIGTERM, like a server: the simulator's systemctl starts and stops it along the story.
"""

import argparse
import json
import signal
import sys
import time
from pathlib import Path


def build_parser():
    import console

    data = json.loads((Path(console.__file__).parent / "data" / "sglang_flags_0.5.23.json").read_text())
    parser = argparse.ArgumentParser(prog="sglang serve")
    for flag in data["flags"]:
        names = [flag["flag"], *flag["aliases"]]
        if flag["takes_value"]:
            parser.add_argument(*names, dest=flag["dest"], help=flag["help"].replace("%", "%%"))
        elif "--no-" in flag["type"]:
            parser.add_argument(*names, dest=flag["dest"], action=argparse.BooleanOptionalAction,
                                help=flag["help"].replace("%", "%%"))
        else:
            parser.add_argument(*names, dest=flag["dest"], action="store_true", help=flag["help"].replace("%", "%%"))
    return parser


def main(argv):
    parser = build_parser()
    parser.parse_args(argv)  # --help exits here; bad flags fail here, as in SGLang
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main(sys.argv[1:])
