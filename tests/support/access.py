"""Bucket policies and refusals, as the access tests write them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.s3 import code


def policy(name: str, *statements: dict) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def refused(call: Any, **kwargs: Any) -> str:
    with pytest.raises(ClientError) as error:
        call(**kwargs)
    return code(error.value)
