"""One measured row: printed as a JSON line, and appended to a raw file when given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def emit(row: dict[str, Any], path: Path | None) -> None:
    """Print ``row`` as one JSON line; append the same line to ``path`` if any."""
    line = json.dumps(row)
    print(line, flush=True)
    if path:
        with path.open("a") as fh:
            fh.write(line + "\n")
