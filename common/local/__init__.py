"""Local modes (no AWS): RIE processes, the moto server, event wiring, SMTP ingress.

Never imported by the Lambda handlers; its heavier dependencies (moto, aiosmtpd,
docker) are the `local` extra and are imported lazily.
"""
