"""LocalStack init hook (start stage, run inside LocalStack's process): SES send errors as AWS answers them.

LocalStack 4.4.0's SES provider calls moto's SES backend directly and does not translate moto's
exceptions, so SES's ``MessageRejected`` (an unverified sender: HTTP 400 on AWS) reaches clients
as a retryable ``500 InternalError`` whose message embeds moto's XML (measured with SendRawEmail
after DeleteIdentity; LocalStack 1.4 still answered 400 MessageRejected). The senders decide
between retry and failure by the error code, so this re-raises moto's SES errors as the
service error AWS sends: same code, same message, same HTTP status.
"""

from localstack.aws.api import CommonServiceException
from moto.ses.exceptions import SesError
from moto.ses.models import SESBackend


def _as_aws_error(send):
    def call(self, *args, **kwargs):
        try:
            return send(self, *args, **kwargs)
        except SesError as exc:
            raise CommonServiceException(
                exc.error_type, exc.message, status_code=exc.code, sender_fault=exc.code < 500
            ) from None

    call.__wrapped__ = send
    return call


for _name in ("send_email", "send_raw_email", "send_templated_email", "send_bulk_templated_email"):
    _method = getattr(SESBackend, _name, None)
    if _method is not None and not hasattr(_method, "__wrapped__"):
        setattr(SESBackend, _name, _as_aws_error(_method))
