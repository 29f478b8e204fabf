"""Record this repository's own history and draw its dashboard: the docs' screenshot (docs/history.md).

For each of the last N first-parent commits of a revision, `perfsuite run WORKLOAD --json` in a git
worktree of that commit (its perfsuite first on PYTHONPATH), each Result recorded with `perfsuite history`,
then `perfsuite history show` and, where chromium is installed, a screenshot of the page.

    python scripts/history_of_this_repo.py --last 6 --workload gray_classifier --out docs/data/history
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--last", type=int, default=6)
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--workload", default="gray_classifier")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "data" / "history")
    args = parser.parse_args()
    shas = subprocess.run(
        ["git", "-C", str(ROOT), "rev-list", "--first-parent", f"-{args.last}", args.rev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()[::-1]
    store = args.out / "store"
    with tempfile.TemporaryDirectory(prefix="perfsuite-history-") as tmp:
        for sha in shas:
            tree = Path(tmp) / sha[:12]
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), sha], check=True)
            try:
                env = {"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
                run = subprocess.run(
                    [sys.executable, "-m", "perfsuite.cli", "run", args.workload, "--json"],
                    cwd=tree,
                    env=env,
                    capture_output=True,
                    text=True,
                )
                if run.returncode != 0:
                    print(f"{sha[:12]}: run failed ({run.stderr.strip().splitlines()[-1:]}); skipped")
                    continue
                result = Path(tmp) / f"{sha}.json"
                result.write_text(run.stdout)
                subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "perfsuite.cli",
                        "history",
                        "import",
                        f"{sha}={result}",
                        "--history",
                        str(store),
                        "--repo",
                        str(ROOT),
                    ],
                    check=True,
                )
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    page = args.out / "dashboard.html"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "perfsuite.cli",
            "history",
            "show",
            "--history",
            str(store),
            "--out",
            str(page),
            "--overwrite",
            "--repo",
            str(ROOT),
            "--commit",
            args.rev,
        ],
        check=True,
    )
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium:
        subprocess.run(
            [
                chromium,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--window-size=1400,1800",
                f"--screenshot={args.out / 'dashboard.png'}",
                page.resolve().as_uri(),
            ],
            check=False,
            capture_output=True,
        )
    print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
