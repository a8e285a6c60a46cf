"""A multipart/form-data body read as it streams: the fields before the file, whole and
capped, then the file's bytes as they arrive (never held whole). python-multipart's push
parser is fed one chunk at a time; its callbacks queue what each chunk held.

Shared by S3's POST uploads and /v1's form uploads; each protocol words `FormError` its
own way."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

MAX_FIELDS_BYTES = 64 * 1024
"""The fields before the file, together (S3's policy alone may take 20 KB)."""


class FormError(Exception):
    """The body is not well-formed multipart/form-data with a file; `too_large`: the
    fields before the file pass `MAX_FIELDS_BYTES`."""

    def __init__(self, message: str, too_large: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large


def boundary_of(content_type: str | None) -> bytes:
    kind, options = parse_options_header(content_type or "")
    boundary = options.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise FormError("the Content-Type is not multipart/form-data with a boundary")
    return boundary


@dataclass
class FilePart:
    filename: str
    content_type: str | None


@dataclass
class PostForm:
    """A browser's POST upload, read up to its file: the fields, the file's part, and what
    is left of the body to stream."""

    reader: FormReader
    fields: dict[str, str]
    file: FilePart
    size: tuple[int, int] | None = None
    """The size range the signed policy allows (content-length-range)."""


class FormReader:
    def __init__(
        self, stream: AsyncIterator[bytes], boundary: bytes, any_file: bool = False
    ) -> None:
        """`any_file`: the file is the first part with a file name, whatever its field's name
        (Supabase's client names it ""); else the field named `file` (S3)."""
        self._stream = stream
        self._any_file = any_file
        self._events: deque[tuple[str, bytes]] = deque()
        self._parts: deque[dict[str, str]] = deque()
        """The headers of each part begun, in order (the events say when each is read)."""
        self._header: list[bytes] = [b"", b""]
        self._headers: dict[str, str] = {}
        self._done = False
        self._parser = MultipartParser(
            boundary,
            {
                "on_part_begin": self._part_begin,
                "on_header_field": lambda data, start, end: self._add(0, data[start:end]),
                "on_header_value": lambda data, start, end: self._add(1, data[start:end]),
                "on_header_end": self._header_end,
                "on_headers_finished": self._headers_finished,
                "on_part_data": lambda data, start, end: self._events.append(
                    ("data", bytes(data[start:end]))
                ),
                "on_part_end": lambda: self._events.append(("end", b"")),
                "on_end": lambda: self._events.append(("done", b"")),
            },
        )

    def _part_begin(self) -> None:
        self._headers = {}

    def _add(self, which: int, data: bytes) -> None:
        self._header[which] += data

    def _headers_finished(self) -> None:
        self._parts.append(self._headers)
        self._events.append(("headers", b""))

    def _header_end(self) -> None:
        name, value = self._header
        # Latin-1 keeps every byte as it came: parse_options_header encodes back to bytes, and
        # a field name in UTF-8 is decoded from those.
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")
        self._header = [b"", b""]

    async def _next(self) -> tuple[str, bytes]:
        while not self._events:
            if self._done:
                raise FormError("the body ended before the file")
            chunk = await anext(self._stream, None)
            try:
                if chunk is None:
                    self._parser.finalize()
                    self._done = True
                else:
                    self._parser.write(chunk)
            except MultipartParseError as exc:
                raise FormError(str(exc)) from None
        return self._events.popleft()

    async def fields(self) -> tuple[dict[str, str], FilePart]:
        """The fields before the file (names lower-cased, first value kept) and the file's
        part; FormError without a file, or past the cap."""
        fields: dict[str, str] = {}
        total = 0
        while True:
            kind, _ = await self._next()
            if kind == "done":
                raise FormError("there is no file field")
            if kind != "headers":
                continue
            headers = self._parts.popleft()
            _, options = parse_options_header(headers.get("content-disposition", ""))
            name = options.get(b"name", b"").decode("utf-8", "replace").lower()
            if name == "file" or (self._any_file and b"filename" in options):
                try:
                    filename = options.get(b"filename", b"").decode("utf-8")
                except UnicodeDecodeError:
                    raise FormError("the file name is not UTF-8") from None
                return fields, FilePart(filename, headers.get("content-type"))
            value = b""
            while (event := await self._next())[0] == "data":
                value += event[1]
                total += len(event[1])
                if total > MAX_FIELDS_BYTES:
                    raise FormError("the fields before the file are too large", too_large=True)
            fields.setdefault(name, value.decode("utf-8", "replace"))

    async def file(self) -> AsyncIterator[bytes]:
        """The file's bytes, as they arrive; what follows the file is read and ignored."""
        while (event := await self._next())[0] == "data":
            if event[1]:
                yield event[1]
        try:
            while (await self._next())[0] != "done":
                pass
        except FormError:
            pass  # whatever follows the file is not the upload's
