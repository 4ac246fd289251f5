"""What every benchmark script does at the end: print the report and save it atomically."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_report(report: dict[str, Any], out: Path | None) -> None:
    text = json.dumps(report, indent=2)
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, out)
