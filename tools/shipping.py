"""What the ``ship_*`` tools share: the offline-profile rule, the command line of the two
that ship from a cache folder (the folder, or ``--check``), and the probe verdict they print."""
import argparse
import sys
from pathlib import Path

from ragbook import models


def arguments(doc: str, folder_help: str, what: str) -> argparse.Namespace:
    """``folder`` or ``--check`` from the command line; exits unless the offline profile is
    active (only its models' outputs ship) or when neither is given."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, help=folder_help)
    parser.add_argument("--check", action="store_true", help="verify instead of writing")
    args = parser.parse_args()
    offline_only(what)
    if not args.check and args.folder is None:
        parser.error("give the cache folder to ship from (or --check)")
    return args


def offline_only(what: str) -> None:
    """Exit unless the offline profile is active: only its models' ``what`` ship."""
    if models.active_profile() != "offline":
        sys.exit(f"run with RAGBOOK_PROFILE=offline: only the offline {what} ship")


def verdict(path: Path, ok: bool) -> int:
    """Print whether ``path``'s probe agrees with this model; the exit status to return."""
    print(f"{path.name}: {'probe agrees' if ok else 'probe disagrees'} with this model")
    return 0 if ok else 1
