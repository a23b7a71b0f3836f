#!/usr/bin/env python3
"""Delete the botocore (and boto3 resource) models of AWS services the functions never call.

botocore ships one folder of JSON models per service under botocore/data (about 28 MB for 400+
services); a client loads only its own service's folder plus the shared top-level files
(endpoints.json, partitions.json, sdk-default-configuration.json, _retry.json), which are kept.
The loader searches <botocore root>/data/ for <service>/<api-version>/<type>-<n>.json, so a
service without a folder is one a client cannot be created for (botocore Loaders Reference,
https://docs.aws.amazon.com/botocore/latest/reference/loaders.html). boto3/data holds the
resource models (boto3.resource) of a few services; the same list trims it.

Usage: trim-botocore.py SERVICES_FILE [SITE_PACKAGES]  (default: the running interpreter's)
"""

from __future__ import annotations

import shutil
import sys
import sysconfig
from pathlib import Path


def read_services(path: Path) -> list[str]:
    """The service names in a list file: one per line, '#' starts a comment."""
    return [name for line in path.read_text().splitlines() if (name := line.split("#", 1)[0].strip())]


def trim(services: list[str], site_packages: Path) -> int:
    """Delete every service folder not in ``services``; return the bytes freed.

    A listed service missing from botocore/data is an error (a typo would otherwise ship a
    base image whose client for that service cannot be created)."""
    botocore_data = site_packages / "botocore" / "data"
    missing = sorted(s for s in services if not (botocore_data / s).is_dir())
    if missing:
        raise SystemExit(f"trim-botocore: no botocore model for {', '.join(missing)} in {botocore_data}")
    freed = 0
    for data in (botocore_data, site_packages / "boto3" / "data"):
        if not data.is_dir():
            continue
        for folder in data.iterdir():
            if folder.is_dir() and folder.name not in services:
                freed += sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
                shutil.rmtree(folder)
    return freed


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        raise SystemExit(__doc__)
    site_packages = Path(argv[2] if len(argv) == 3 else sysconfig.get_path("purelib"))
    freed = trim(read_services(Path(argv[1])), site_packages)
    print(f"trim-botocore: freed {freed / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
