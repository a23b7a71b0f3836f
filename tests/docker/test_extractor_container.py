"""The extractor gives byte-identical output under the host RIE and inside its image."""

from __future__ import annotations

import boto3
import pytest

from common.runtime.functions import image_ref
from tests.support.extraction import BUCKET, outputs, sample_files, upload

pytestmark = pytest.mark.docker


def _clear(s3) -> None:
    for obj in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        s3.delete_object(Bucket=BUCKET, Key=obj["Key"])


def test_host_and_container_write_identical_text(rie_function, run_image, moto_server) -> None:
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    try:
        files = {k: v for k, v in sample_files().items() if k != "bomb.docx"}
        event = upload(s3, files)
        rie_function("attachment-extractor").invoke(event)
        host = outputs(s3)
        for key in host:
            s3.delete_object(Bucket=BUCKET, Key=key)
        container = run_image(image_ref("attachment-extractor"), host_network=True,
                              env={"AWS_ENDPOINT_URL": moto_server})
        container.invoke(event)
        inside = outputs(s3)
        assert sorted(host) == sorted(inside) and len(host) == 4
        for key, (body, meta) in host.items():
            assert inside[key][0] == body, key
            strip = lambda m: {k: v for k, v in m.items() if k != "extraction-ms"}  # noqa: E731
            assert strip(inside[key][1]) == strip(meta), key
    finally:
        _clear(s3)
        s3.delete_bucket(Bucket=BUCKET)
