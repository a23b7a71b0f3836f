"""Local emulation (no AWS): the moto server and its IAM, RIE processes, the event wiring, the SMTP
ingress, the dev stack, the outbox, the local modes' provisioning and the local commands.

Host-only: never imported by the Lambda handlers and never copied into an image; its
heavier dependencies (moto, aiosmtpd, docker) are the `local` extra and are imported lazily. moto is
imported only by local/motoadapter.py, which names the moto version the emulator's patches were written
for and lists each patch. Nothing here acts on a deployment by ``--env``: that is ops/.
"""
