"""The bucket permissions the deployment guide lists cover every S3 operation the storage adapter
makes: a new call without its IAM action in the guide fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "operators" / "deploy.md"
ADAPTER = ROOT / "adapters" / "storage" / "s3.py"

ACTION_OF = {
    "put_object": "s3:PutObject",
    "create_multipart_upload": "s3:PutObject",
    "upload_part": "s3:PutObject",
    "complete_multipart_upload": "s3:PutObject",
    "abort_multipart_upload": "s3:AbortMultipartUpload",
    "get_object": "s3:GetObject",
    "delete_object": "s3:DeleteObject",
    "head_bucket": "s3:ListBucket",
    "list_objects_v2": "s3:ListBucket",
    "list_multipart_uploads": "s3:ListBucketMultipartUploads",
}
"""The IAM action AWS checks for each S3 operation (the Service Authorization Reference)."""


def _operations() -> set[str]:
    source = ADAPTER.read_text()
    called = set(re.findall(r"_client\.([a-z0-9_]+)\b", source)) - {"meta", "get_paginator"}
    paginated = set(re.findall(r'get_paginator\("([a-z0-9_]+)"\)', source))
    return called | paginated


def _section() -> str:
    text = GUIDE.read_text()
    start = text.index("## The bucket's permissions")
    return text[start : text.index("\n## ", start + 1)]


def test_every_operation_of_the_adapter_has_a_known_action():
    operations = _operations()
    assert {"put_object", "upload_part", "get_object", "head_bucket"} <= operations
    assert operations <= ACTION_OF.keys(), operations - ACTION_OF.keys()


def test_the_guide_names_every_action_and_its_example_policy_grants_them():
    section = _section()
    needed = {ACTION_OF[operation] for operation in _operations()}
    assert {action for action in needed if f"`{action}`" not in section} == set()
    policy = json.loads(re.search(r"```json\n(.*?)```", section, re.S).group(1))
    granted = {
        action
        for statement in policy["Statement"]
        if statement["Effect"] == "Allow"
        for action in statement["Action"]
    }
    assert needed <= granted, needed - granted
