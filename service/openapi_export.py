"""Write the app's OpenAPI document to ``openapi/openapi.json`` (``make openapi``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from redis import Redis

from core.settings import Settings
from service.app import create_app

OPENAPI_PATH = Path(__file__).resolve().parent.parent / "openapi" / "openapi.json"


def current_openapi() -> dict:
    # The document does not depend on Redis; a lazy client that is never used keeps it offline.
    app = create_app(Settings(), redis=Redis())
    return app.openapi()


def render() -> str:
    return json.dumps(current_openapi(), indent=2, sort_keys=True) + "\n"


def main() -> int:
    OPENAPI_PATH.parent.mkdir(exist_ok=True)
    OPENAPI_PATH.write_text(render(), encoding="utf-8")
    print(f"wrote {OPENAPI_PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
