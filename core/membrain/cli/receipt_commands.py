"""The erasure receipt commands: list and export a dataset's receipts, verify one."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from membrain.api.erasure import ErasureReceipt
from membrain.api.errors import InputError
from membrain.cli.common import (
    DatasetOption,
    JsonOption,
    PathOption,
    app,
    err,
    failures,
    open_memory,
    say,
)

__all__ = ["receipts", "verify_erasure"]


@app.command()
def receipts(
    dataset: DatasetOption,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the receipts here, as a JSON array."),
    ] = None,
    path: PathOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the erasure receipts of a dataset (ids and salted hashes, no content)."""
    with failures():
        with open_memory(path) as memory:
            found = memory.receipts(dataset)
        if output is not None:
            data = [r.model_dump(mode="json") for r in found]
            try:
                output.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
            except OSError as exc:
                raise InputError(f"cannot write {output}: {exc.strerror}") from None
            err.print(f"wrote {len(found)} receipt(s) to {output}", highlight=False)
            return
        for receipt in found:
            if as_json:
                sys.stdout.write(receipt.model_dump_json() + "\n")
                continue
            count = len(tuple(receipt.ids()))
            where = ", ".join(f"{s.dataset}/{s.task}" for s in receipt.scopes)
            say(
                f"{receipt.id} {receipt.erased_at:%Y-%m-%dT%H:%M:%SZ} {receipt.kind.value} "
                f"{count} record(s) of {where} by {receipt.by}"
            )
        if not found and not as_json:
            say("  (no receipts)")


def _load(file: Path) -> ErasureReceipt:
    """The receipt of a file: one receipt, or an array of one (as ``receipts -o`` writes)."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"cannot read {file}: {exc}") from None
    if isinstance(data, list):
        if len(data) != 1:
            raise InputError(f"{file} holds {len(data)} receipts; give a file of one")
        data = data[0]
    try:
        return ErasureReceipt.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{file} is not an erasure receipt: {exc.errors()[0]['msg']}") from None


@app.command("verify-erasure")
def verify_erasure(
    file: Annotated[Path, typer.Argument(help="A receipt as JSON (receipts --json, or -o).")],
    path: PathOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check an erasure receipt against the store; exit code 1 when something is left."""
    with failures():
        receipt = _load(file)
        with open_memory(path) as memory:
            check = memory.verify_erasure(receipt)
    if as_json:
        sys.stdout.write(check.model_dump_json() + "\n")
    else:
        for finding in check.findings:
            say(f"left: {finding}")
        if check.note:
            say(f"note: {check.note}")
        verdict = "verified" if check.ok else "FAILED"
        say(f"{verdict}: receipt {check.receipt} ({check.files_checked} file(s) read)")
    if not check.ok:
        raise typer.Exit(1)
