"""Second cold-start baseline: the smallest handler that does what every function does first, one
AWS call (boto3 import, client, an S3 GetObject) against the same emulator, on the same base, with
what every function gets from the base (the entry script, the compiled code) and nothing else."""

import os


def handler(event, context):
    import boto3  # lazily, as the functions do

    s3 = boto3.session.Session().client("s3")
    try:
        s3.get_object(
            Bucket=os.environ.get("EMAIL_BUCKET", "service-email-handler-local-mail"), Key="staging/none"
        )
    except s3.exceptions.NoSuchKey:
        pass
    return {"hello": "aws"}
