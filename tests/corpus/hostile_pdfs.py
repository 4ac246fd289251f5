"""Hostile PDFs written byte by byte, small on disk and generated on demand (never committed).

Each maker returns the bytes of one file built to hurt a reader in one way: no text layer, a
page count in the tens of thousands, objects nested far past any recursion limit, a page tree
that loops, a content stream that inflates past pypdf's own limit, pages that stay under it but
together hold gigabytes, or one small page that takes pypdf minutes. ``benchmarks/hostile.py``
builds its corpus from these too.
"""

from __future__ import annotations

import io
import zlib

import pypdf

from tests.corpus.pdfs import make_pdf

__all__ = [
    "encrypted_pdf",
    "flate_bomb_pdf",
    "image_only_pdf",
    "lying_count_pdf",
    "many_pages_pdf",
    "memory_bomb_pdf",
    "nested_arrays_pdf",
    "nested_dicts_pdf",
    "page_tree_loop_pdf",
    "slow_text_pdf",
]

_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def _assemble(objects: list[bytes]) -> bytes:
    """Objects numbered from 1 (object 1 is the catalog), with a correct xref table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def _stream(data: bytes, extra: bytes = b"", *, compress: bool = False) -> bytes:
    if compress:
        data = zlib.compress(data, 9)
        extra += b" /Filter /FlateDecode"
    return b"<< /Length %d%s >>\nstream\n" % (len(data), extra) + data + b"\nendstream"


def _text_page(parent: int, content: int, extra: bytes = b"") -> bytes:
    return (
        b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
        b"/Contents %d 0 R%s >>" % (parent, content, extra)
    )


def _one_page(extra: bytes = b"", text: bytes = b"Kinase signalling in zebrafish fins.") -> bytes:
    content = b"BT /F1 10 Tf 50 750 Td (%s) Tj ET" % text
    return _assemble(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
            _FONT,
            _text_page(2, 5, extra),
            _stream(content),
        ]
    )


def encrypted_pdf(password: str = "a password") -> bytes:
    """A readable one-page PDF locked with a user password (RC4, so no crypto library is needed)."""
    writer = pypdf.PdfWriter(clone_from=io.BytesIO(make_pdf(["Secret kinase results."])))
    writer.encrypt(password, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def image_only_pdf() -> bytes:
    """A scanned page: one greyscale image drawn over the page, and no text layer at all."""
    pixels = bytes(range(256)) * 64  # a 128x128 gradient
    image = _stream(
        pixels,
        b" /Type /XObject /Subtype /Image /Width 128 /Height 128 /ColorSpace /DeviceGray /BitsPerComponent 8",
        compress=True,
    )
    return _assemble(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /XObject << /Im1 4 0 R >> >> /Contents 5 0 R >>",
            image,
            _stream(b"q 612 0 0 792 0 0 cm /Im1 Do Q"),
        ]
    )


def many_pages_pdf(n_pages: int = 20_000, *, text: bool = True) -> bytes:
    """``n_pages`` real pages sharing one content stream (about 110 bytes on disk a page)."""
    first_page = 5
    kids = b" ".join(b"%d 0 R" % (first_page + i) for i in range(n_pages))
    content = b"BT /F1 10 Tf 50 750 Td (Page text about kinases.) Tj ET" if text else b""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, n_pages),
        _FONT,
        _stream(content),
    ]
    objects += [_text_page(2, 4)] * n_pages
    return _assemble(objects)


def lying_count_pdf(count: int = 2**31 - 1) -> bytes:
    """One real page in a page tree that claims ``count`` pages."""
    page = _one_page(text=b"One real page about zebrafish fins under a lying page count.")
    return page.replace(b"/Count 1", b"/Count %d" % count)


def nested_arrays_pdf(depth: int = 100_000) -> bytes:
    """A page carrying an array nested ``depth`` deep: ``[[[[ … ]]]]``."""
    return _one_page(b" /Nest " + b"[" * depth + b"]" * depth)


def nested_dicts_pdf(depth: int = 100_000) -> bytes:
    """A page carrying a dictionary nested ``depth`` deep: ``<< /A << /A … >> >>``."""
    nest = b" /Nest " + b"<< /A " * depth + b"<< >>" + b" >>" * depth
    return _one_page(nest, text=b"One page about zebrafish kinases beside a deep dictionary.")


def page_tree_loop_pdf() -> bytes:
    """A page tree whose inner node lists the root as its own child: a walk never ends."""
    return _assemble(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R 5 0 R] /Count 2 >>",
            b"<< /Type /Pages /Parent 2 0 R /Kids [2 0 R] /Count 1 >>",
            _FONT,
            _text_page(2, 6),
            _stream(b"BT /F1 10 Tf 50 750 Td (Looping tree.) Tj ET"),
        ]
    )


def flate_bomb_pdf(inflated_mb: int = 80) -> bytes:
    """A content stream that inflates to ``inflated_mb`` MB (about 1,000:1 from the file)."""
    # Compressed once in 1 MB steps so making it costs little memory here too.
    packer = zlib.compressobj(9)
    block = b" " * 1_000_000
    data = b"".join(packer.compress(block) for _ in range(inflated_mb)) + packer.flush()
    return _assemble(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
            _FONT,
            _text_page(2, 5),
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + b"\nendstream",
        ]
    )


def memory_bomb_pdf(n_pages: int = 40, inflated_mb: int = 70) -> bytes:
    """Pages each with its own content stream of ``inflated_mb`` MB (under pypdf's 75 MB inflate
    limit) of path operators; pypdf keeps every decoded stream, so memory grows page by page
    (~70 MiB a page) from a file of ~100 KB a page."""
    packer = zlib.compressobj(9)
    block = b"0 0 m\n" * 166_666  # ~1 MB
    data = b"".join(packer.compress(block) for _ in range(inflated_mb)) + packer.flush()
    stream = b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + b"\nendstream"
    kids = b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(n_pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, n_pages),
        _FONT,
    ]
    for i in range(n_pages):  # page 4+2i, its own copy of the stream at 5+2i
        objects += [_text_page(2, 5 + 2 * i), stream]
    return _assemble(objects)


def slow_text_pdf(n_ops: int = 100_000) -> bytes:
    """One page of ``n_ops`` text-showing operators. pypdf's extraction is quadratic in them:
    5,000 take ~1.3 s, 20,000 ~9 s, 100,000 (a 50 KB file) several minutes."""
    line = b"(" + b"kinase signalling in zebrafish fin regeneration " * 2 + b") Tj\n"
    return _assemble(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
            _FONT,
            _text_page(2, 5),
            _stream(b"BT /F1 10 Tf\n" + line * n_ops + b"ET", compress=True),
        ]
    )
