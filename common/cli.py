"""The `email-handler` console script."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from common.functions import BY_NAME, FUNCTIONS


def _invoke(args: argparse.Namespace) -> int:
    from common.local.rie import InvokeError, invoke

    fn = BY_NAME[args.function]
    url = args.url or f"http://{args.host}:{fn.port}"
    event = json.loads(Path(args.event).read_text()) if args.event != "-" else json.load(sys.stdin)
    try:
        result = invoke(url, event, timeout=args.timeout)
    except InvokeError as exc:
        print(json.dumps(exc.payload, indent=2), file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"cannot reach {args.function} at {url}: {exc}. Is the local stack running (make up / email-handler dev)?",
              file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="email-handler", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("invoke", help="invoke one function through its RIE endpoint")
    p.add_argument("function", choices=[f.name for f in FUNCTIONS])
    p.add_argument("--event", required=True, help="event JSON file ('-' for stdin)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--url", help="RIE base URL (default: the function's local port, 9001-9006)")
    p.add_argument("--timeout", type=float, default=120.0)
    p.set_defaults(run=_invoke)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
