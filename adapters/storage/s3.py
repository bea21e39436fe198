"""``ResultStorage`` on an S3-compatible server (AWS S3, nanio, MinIO, SeaweedFS) via aiobotocore.

Objects are streamed with multipart uploads of ``part_size`` bytes (about two parts in memory at
most); an object smaller than one part is sent with a single PutObject. Nothing is visible at the
key until ``commit`` succeeds.

Requests are signed (SigV4) without their bodies (``UNSIGNED-PAYLOAD``), on plain HTTP too, and
carry no body checksum: botocore's SHA-256 of every part cost the worker about as much CPU as
sealing the result. What is stored is AES-256-GCM ciphertext whose tag, and the result HMAC,
authenticate every byte end to end, checked whenever a result is opened; a body altered or
corrupted on the way fails there rather than at upload. The local S3 server in use (nanio) checks
neither the payload hash nor flexible checksums; over TLS the transport protects the body.

A bucket with S3 Object Lock (a default retention) refuses a PutObject or UploadPart that
carries neither ``Content-MD5`` nor a checksum (AWS S3, MinIO, Backblaze B2 alike). The first
such refusal turns ``Content-MD5`` on for every later body of the process, and the refused
request is sent again with it: nothing to configure, and no digest is computed for a bucket that
does not ask for one.

A part is collected in a ``BytesIO`` and handed to botocore as it is: aiohttp then sends it in
small reads, where a ``bytes`` or ``bytearray`` body is copied whole three or four times on the
way to the socket.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import io
import logging
import uuid
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiobotocore.session import get_session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.handlers import add_expect_header

from application.errors import StorageError, StorageRejected
from application.ports.audit import WitnessConflict
from application.ports.result_storage import ResultStorage, ResultUpload

log = logging.getLogger(__name__)

MiB = 1024 * 1024
MIN_PART_SIZE = 5 * MiB
MAX_PART_SIZE = 5 * 1024 * MiB
MAX_PARTS = 10_000
CONTENT_TYPE = "application/octet-stream"

_NOT_FOUND = {"404", "NoSuchBucket", "NoSuchKey", "NotFound"}
_DENIED = {
    "403",
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
}
_GONE = {"404", "NoSuchUpload"}


@dataclass(frozen=True, slots=True)
class S3Settings:
    """Connection settings. Static credentials: both or neither (neither: AWS default chain)."""

    bucket: str
    endpoint_url: str | None = None
    region: str = "us-east-1"
    key_prefix: str = ""
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    use_path_style: bool = False
    part_size: int = 8 * MiB

    def __post_init__(self) -> None:
        if not self.bucket:
            raise ValueError("s3 bucket name is required")
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ValueError("s3 access key id and secret access key must be given together")
        if not MIN_PART_SIZE <= self.part_size <= MAX_PART_SIZE:
            raise ValueError(f"s3 part size must be between {MIN_PART_SIZE} and {MAX_PART_SIZE}")


def _client_error_code(e: ClientError) -> str:
    error = e.response.get("Error", {})
    code = str(error.get("Code") or "")
    if not code:
        code = str(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
    return code


@contextlib.contextmanager
def _wrap(operation: str) -> Iterator[None]:
    """Turn botocore/aiohttp failures into ``StorageError`` with a message free of secrets."""
    try:
        yield
    except StorageError:
        raise
    except ClientError as e:
        code = _client_error_code(e)
        if code in _NOT_FOUND:
            raise StorageRejected(f"s3 {operation} failed: not found ({code})") from e
        if code in _DENIED:
            raise StorageRejected(f"s3 {operation} failed: access denied ({code})") from e
        said = str(e.response.get("Error", {}).get("Message") or "")[:200]
        detail = f"{code or 'error'} ({said})" if said else code or "error"
        raise StorageError(f"s3 {operation} failed: {detail}") from e
    except (BotoCoreError, aiohttp.ClientError, OSError) as e:
        raise StorageError(f"s3 {operation} failed: {type(e).__name__}") from e


_DIGEST_IN_THREAD = 256 * 1024
"""A body this large is hashed off the event loop (hashlib lets go of the GIL)."""


def _content_md5(body: bytes | io.BytesIO) -> str:
    with memoryview(body) if isinstance(body, bytes) else body.getbuffer() as view:
        return base64.b64encode(hashlib.md5(view, usedforsecurity=False).digest()).decode()


def _size(body: bytes | io.BytesIO) -> int:
    if isinstance(body, bytes):
        return len(body)
    with body.getbuffer() as view:
        return view.nbytes


def _is_denied(error: StorageError) -> bool:
    cause = error.__cause__
    return isinstance(cause, ClientError) and _client_error_code(cause) in ("403", "AccessDenied")


def _asks_for_digest(error: ClientError) -> bool:
    """The server refused a body for want of ``Content-MD5`` (or a checksum): what AWS S3 and
    B2 answer for an Object Lock bucket (``InvalidRequest``), and MinIO (``MissingContentMD5``)."""
    code = _client_error_code(error)
    message = str(error.response.get("Error", {}).get("Message") or "").lower()
    return code == "MissingContentMD5" or (code == "InvalidRequest" and "content-md5" in message)


class _Bodies:
    """Sends the requests that carry a body (PutObject, UploadPart), with ``Content-MD5`` once
    the bucket has asked for it; shared by a storage and its uploads."""

    def __init__(self) -> None:
        self.with_md5 = False

    async def send(self, call: Any, body: bytes | io.BytesIO, **params: Any) -> Any:
        if not self.with_md5:
            try:
                return await call(Body=body, **params)
            except ClientError as error:
                if not _asks_for_digest(error):
                    raise
                if not self.with_md5:  # another request may have turned it on meanwhile
                    self.with_md5 = True
                    log.info("storage.content_md5.on", extra={"reason": _client_error_code(error)})
            if isinstance(body, io.BytesIO):
                body.seek(0)  # the refused request read it
        return await call(Body=body, ContentMD5=await self._digest(body), **params)

    @staticmethod
    async def _digest(body: bytes | io.BytesIO) -> str:
        if _size(body) >= _DIGEST_IN_THREAD:
            return await asyncio.to_thread(_content_md5, body)
        return _content_md5(body)


class S3ResultUpload(ResultUpload):
    """One object being written; not safe for concurrent ``write`` calls.

    A full part is uploaded in the background while the next one fills, so extraction does not
    wait for the network; at most one part is in flight, which bounds memory to two parts.
    """

    def __init__(
        self, client: Any, bucket: str, key: str, part_size: int, bodies: _Bodies | None = None
    ) -> None:
        self._client = client
        self._bodies = bodies if bodies is not None else _Bodies()
        self._bucket = bucket
        self._key = key
        self._part_size = part_size
        self._pending = io.BytesIO()  # the part being filled: fewer than part_size bytes
        self._sent: io.BytesIO | None = None  # the last part uploaded, its buffer to fill again
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []
        self._inflight: asyncio.Task[None] | None = None
        self._state = "open"

    async def write(self, data: bytes) -> None:
        self._require_open("write")
        view = memoryview(data)
        try:
            while len(view) >= (room := self._part_size - self._pending.tell()):
                self._pending.write(view[:room])
                view = view[room:]
                await self._send_part()
            self._pending.write(view)
        except StorageError:
            await self._abort_quietly()
            raise

    def _take_pending(self) -> io.BytesIO:
        """The part filled so far, to send; the buffer of the part sent last (or a new one)
        takes its place, so the memory of a part is faulted in once per upload."""
        body = self._pending
        body.truncate()  # what a refilled buffer held past the position (a last, short part)
        body.seek(0)
        self._pending = self._sent if self._sent is not None else io.BytesIO()
        self._sent = None
        return body

    async def commit(self) -> None:
        if self._state == "committed":
            return
        self._require_open("commit")
        try:
            if self._upload_id is None:
                body = self._take_pending()
                with _wrap("put object"):
                    await self._bodies.send(
                        self._client.put_object,
                        body,
                        Bucket=self._bucket,
                        Key=self._key,
                        ContentType=CONTENT_TYPE,
                    )
            else:
                if self._pending.tell():
                    await self._send_part()
                await self._settle()
                self._parts.sort(key=lambda part: int(part["PartNumber"]))
                with _wrap("complete multipart upload"):
                    await self._client.complete_multipart_upload(
                        Bucket=self._bucket,
                        Key=self._key,
                        UploadId=self._upload_id,
                        MultipartUpload={"Parts": self._parts},
                    )
        except StorageError:
            await self._abort_quietly()
            raise
        self._state = "committed"

    async def abort(self) -> None:
        if self._state != "open":
            return
        self._pending = io.BytesIO()
        if self._inflight is not None:
            self._inflight.cancel()
            with contextlib.suppress(BaseException):
                await self._inflight
            self._inflight = None
        if self._upload_id is not None:
            with _wrap("abort multipart upload"):
                try:
                    await self._client.abort_multipart_upload(
                        Bucket=self._bucket, Key=self._key, UploadId=self._upload_id
                    )
                except ClientError as e:
                    # Already gone (an earlier abort, or a lifecycle rule) counts as aborted.
                    if _client_error_code(e) not in _GONE:
                        raise
        self._upload_id = None
        self._parts = []
        self._state = "aborted"

    async def _send_part(self) -> None:
        await self._settle()
        if len(self._parts) >= MAX_PARTS:
            raise StorageError(f"s3 upload exceeds {MAX_PARTS} parts")
        if self._upload_id is None:
            with _wrap("create multipart upload"):
                created = await self._client.create_multipart_upload(
                    Bucket=self._bucket, Key=self._key, ContentType=CONTENT_TYPE
                )
            self._upload_id = str(created["UploadId"])
        body = self._take_pending()
        number = len(self._parts) + 1
        self._parts.append({"PartNumber": number})
        self._inflight = asyncio.create_task(self._upload_part(number, body))

    async def _upload_part(self, number: int, body: io.BytesIO) -> None:
        with _wrap("upload part"):
            sent = await self._bodies.send(
                self._client.upload_part,
                body,
                Bucket=self._bucket,
                Key=self._key,
                UploadId=self._upload_id,
                PartNumber=number,
            )
        self._parts[number - 1]["ETag"] = sent["ETag"]
        body.seek(0)
        self._sent = body

    async def _settle(self) -> None:
        """Waits for the part in flight; its failure surfaces here."""
        if self._inflight is not None:
            task, self._inflight = self._inflight, None
            await task

    async def _abort_quietly(self) -> None:
        with contextlib.suppress(StorageError):
            await self.abort()
        self._state = "aborted"

    def _require_open(self, operation: str) -> None:
        if self._state != "open":
            raise StorageError(f"cannot {operation}: upload already {self._state}")


def _send_bodies_at_once(client: Any) -> None:
    """botocore asks for ``Expect: 100-continue`` on a PutObject, so the client waits for the
    server's interim answer before it sends the body: a round trip more per small result (the
    only objects put in one request: smaller than a part, typically a few kilobytes). The parts
    of a multipart upload never carried it; now no request does."""
    client.meta.events.unregister("before-call.s3", add_expect_header)


class S3ResultStorage(ResultStorage):
    """Open with ``await S3ResultStorage.open(settings)``; release with ``await .close()``."""

    def __init__(self, settings: S3Settings, client: Any, stack: AsyncExitStack) -> None:
        self._settings = settings
        self._client = client
        self._stack = stack
        self._bodies = _Bodies()

    @classmethod
    async def open(cls, settings: S3Settings) -> S3ResultStorage:
        config = Config(
            region_name=settings.region,
            s3={
                "addressing_style": "path" if settings.use_path_style else "auto",
                "payload_signing_enabled": False,
            },
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            retries={"mode": "standard"},
        )
        stack = AsyncExitStack()
        try:
            with _wrap("client setup"):
                client = await stack.enter_async_context(
                    get_session().create_client(
                        "s3",
                        region_name=settings.region,
                        endpoint_url=settings.endpoint_url,
                        aws_access_key_id=settings.access_key_id,
                        aws_secret_access_key=settings.secret_access_key,
                        config=config,
                    )
                )
        except BaseException:
            await stack.aclose()
            raise
        _send_bodies_at_once(client)
        return cls(settings, client, stack)

    async def begin(self, key: str) -> ResultUpload:
        return S3ResultUpload(
            self._client,
            self._settings.bucket,
            self._object_key(key),
            self._settings.part_size,
            self._bodies,
        )

    async def read(self, key: str) -> bytes:
        with _wrap("get object"):
            response = await self._client.get_object(
                Bucket=self._settings.bucket, Key=self._object_key(key)
            )
            async with response["Body"] as stream:
                data: bytes = await stream.read()
        return data

    async def delete(self, key: str) -> None:
        # DeleteObject answers 204 whether or not the key held an object.
        with _wrap("delete object"):
            await self._client.delete_object(
                Bucket=self._settings.bucket, Key=self._object_key(key)
            )

    async def keep(self, key: str, data: bytes) -> None:
        """``WitnessStore.keep``: a conditional create (``If-None-Match: *``, which AWS S3 and
        MinIO honour) after a look at the key (for servers that ignore the condition, such as
        nanio); a bucket with Object Lock keeps the object whatever a later writer does.

        With credentials that may write but not read (the write-only access the auditors guide
        suggests for the relay), the look is denied: the conditional create alone decides, and
        a key already there is taken as kept, since its bytes cannot be compared here (``fetcher
        audit verify --witness`` compares them, with read access)."""
        object_key = self._object_key(key)
        bucket = self._settings.bucket
        readable = True
        try:
            held = await self._held(object_key)
        except StorageRejected as error:
            if not _is_denied(error):
                raise
            readable, held = False, None
        if held is None:
            try:
                with _wrap("put object"):
                    await self._bodies.send(
                        self._client.put_object,
                        data,
                        Bucket=bucket,
                        Key=object_key,
                        IfNoneMatch="*",
                    )
                return
            except StorageError as error:
                if not isinstance(error.__cause__, ClientError) or _client_error_code(
                    error.__cause__
                ) not in ("PreconditionFailed", "ConditionalRequestConflict"):
                    raise
            if not readable:
                return
            held = await self._held(object_key)
        if held != data:
            raise WitnessConflict(f"'{key}' holds other bytes")

    async def _held(self, object_key: str) -> bytes | None:
        try:
            with _wrap("get object"):
                response = await self._client.get_object(
                    Bucket=self._settings.bucket, Key=object_key
                )
                async with response["Body"] as stream:
                    data: bytes = await stream.read()
                return data
        except StorageError as error:
            if isinstance(error.__cause__, ClientError) and _client_error_code(error.__cause__) in (
                "NoSuchKey",
                "404",
                "NotFound",
            ):
                return None
            raise

    async def witnessed(self, key: str) -> bytes | None:
        return await self._held(self._object_key(key))

    async def kept(self, prefix: str) -> list[tuple[str, bytes]]:
        bucket = self._settings.bucket
        start = self._object_key(prefix)
        with _wrap("list objects"):
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=start
            )
            keys = sorted(
                [item["Key"] async for page in pages for item in page.get("Contents", [])]
            )
        found = []
        for object_key in keys:
            data = await self._held(object_key)
            if data is not None:
                found.append((object_key.removeprefix(self._settings.key_prefix), data))
        return found

    async def abort_incomplete(self, key: str) -> int:
        """Lists the bucket's multipart uploads under the key (ListMultipartUploads, every
        page) and aborts those to exactly that key."""
        object_key = self._object_key(key)
        bucket = self._settings.bucket
        aborted = 0
        with _wrap("list multipart uploads"):
            pages = self._client.get_paginator("list_multipart_uploads").paginate(
                Bucket=bucket, Prefix=object_key
            )
            found = [
                str(upload["UploadId"])
                async for page in pages
                for upload in page.get("Uploads", [])
                if upload.get("Key") == object_key
            ]
        for upload_id in found:
            with _wrap("abort multipart upload"):
                try:
                    await self._client.abort_multipart_upload(
                        Bucket=bucket, Key=object_key, UploadId=upload_id
                    )
                except ClientError as e:
                    if _client_error_code(e) not in _GONE:
                        raise
                    continue
            aborted += 1
        return aborted

    async def check(self) -> None:
        try:
            await self._client.head_bucket(Bucket=self._settings.bucket)
        except ClientError as e:
            code = _client_error_code(e)
            bucket = self._settings.bucket
            if code in _NOT_FOUND:
                raise StorageRejected(
                    f"bucket not found: '{bucket}' does not exist; create it, "
                    "or set OBJECT_STORAGE_BUCKET to one that does"
                ) from e
            if code in _DENIED:
                raise StorageRejected(
                    f"access denied to bucket '{bucket}': check OBJECT_STORAGE_ACCESS_KEY_ID "
                    "and its secret, and the bucket's policy"
                ) from e
            raise StorageError(f"s3 head bucket failed: {code or 'error'}") from e
        except (BotoCoreError, aiohttp.ClientError, OSError) as e:
            raise StorageError(f"s3 storage unreachable: {type(e).__name__}") from e

    async def check_writable(self) -> None:
        """Writes a small probe object under the key prefix and deletes it again (for
        ``fetcher check``): ``StorageRejected`` when the bucket is missing or refuses it."""
        key = self._object_key(f".fetcher-check-{uuid.uuid4().hex}")
        bucket = self._settings.bucket
        with _wrap("put object"):
            await self._client.put_object(Bucket=bucket, Key=key, Body=b"fetcher check")
        with _wrap("delete object"):
            await self._client.delete_object(Bucket=bucket, Key=key)

    async def close(self) -> None:
        await self._stack.aclose()

    def _object_key(self, key: str) -> str:
        if not key:
            raise StorageError("object key is empty")
        return self._settings.key_prefix + key
