"""Download open-access PDFs safely and store them content-addressed in the library.

Only http(s) URLs are accepted. The body is streamed with a size cap, a timeout, and a
content-type and ``%PDF`` magic-byte check. The file is written to a temporary name and then
renamed to ``<sha256>.pdf`` inside the library's ``pdfs/`` folder. The name comes from the
content, never from the URL or a title. An existing file is never overwritten: the same name
means the same bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path
from urllib.parse import urlparse

import httpx

from agent.core.errors import FetchError, NetworkDownError
from tools.online import host_limit

__all__ = ["fetch_pdf"]

_PDF_TYPES = ("application/pdf", "application/x-pdf", "application/octet-stream", "binary/octet-stream")


async def fetch_pdf(
    url: str,
    dest_dir: Path,
    *,
    max_bytes: int = 50 * 1024 * 1024,
    timeout_s: float = 30.0,
    client: httpx.AsyncClient | None = None,
) -> Path:
    parsed = urlparse(url)
    if parsed.scheme not in {"http", "https"} or not parsed.netloc:
        raise FetchError(f"refusing to fetch {url!r}: only http(s) URLs are allowed")
    dest_dir.mkdir(parents=True, exist_ok=True)
    own = client is None
    client = client or httpx.AsyncClient(follow_redirects=True, timeout=timeout_s)
    fd, tmp_name = tempfile.mkstemp(prefix=".download-", suffix=".part", dir=dest_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    digest = hashlib.sha256()
    size = 0
    try:
        async with host_limit(parsed.netloc), client.stream("GET", url) as response:
            if response.status_code != 200:
                raise FetchError(f"{url}: HTTP {response.status_code}")
            ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype and ctype not in _PDF_TYPES:
                raise FetchError(f"{url}: not a PDF (content-type {ctype})")
            declared = int(response.headers.get("content-length") or 0)
            if declared > max_bytes:
                raise FetchError(f"{url}: too large ({declared / 1e6:.1f} MB > {max_bytes / 1e6:.0f} MB)")
            first = True
            with tmp.open("wb") as out:  # noqa: ASYNC230 - local disk, written as the body streams
                async for block in response.aiter_bytes():
                    if first:
                        if not block.lstrip()[:5].startswith(b"%PDF"):
                            raise FetchError(f"{url}: body is not a PDF (no %PDF header)")
                        first = False
                    size += len(block)
                    if size > max_bytes:
                        raise FetchError(f"{url}: too large (over {max_bytes / 1e6:.0f} MB)")
                    digest.update(block)
                    out.write(block)
            if first:
                raise FetchError(f"{url}: empty body")
        final = dest_dir / f"{digest.hexdigest()}.pdf"
        if final.exists():
            tmp.unlink()
        else:
            os.replace(tmp, final)
        return final
    except httpx.ConnectError as exc:
        raise NetworkDownError(f"cannot reach {parsed.netloc}: {exc}") from exc
    except httpx.TimeoutException as exc:
        raise FetchError(f"{url}: timed out after {timeout_s:.0f}s") from exc
    except httpx.HTTPError as exc:
        raise FetchError(f"{url}: {type(exc).__name__}: {exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        if own:
            await client.aclose()
