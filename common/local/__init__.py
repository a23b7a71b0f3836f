"""Local emulation (no AWS): the moto server and its IAM, RIE processes, the event wiring, the SMTP
ingress, the dev stack, the outbox, the local modes' provisioning and the local commands.

Never imported by the Lambda handlers and never copied into an image (Dockerfile.base drops it); its
heavier dependencies (moto, aiosmtpd, docker) are the `local` extra and are imported lazily. Nothing
here acts on a deployment by ``--env``: that is common/ops.
"""

__all__ = [
    "commands",
    "devstack",
    "emulator",
    "env",
    "events",
    "fresh",
    "iam",
    "ingress",
    "outbox",
    "provision",
    "pyversion",
    "rie",
    "termsafe",
    "wiring",
]
