"""Exactly once per idempotency key: aws-lambda-powertools' idempotency utility on DynamoDB, with the
send record written by the same request that completes the key.

Powertools makes two writes per key: a conditional PutItem (in progress) before the send and an
UpdateItem (completed, with the send's result) after it. :class:`SendRecordPersistence` adds the
send's correlation id and SES message id to that completion, as top-level attributes, so the SES-id
index (``sesMessageId``, projecting ``correlationId``) finds the send SES feedback is about; its
conversation id and public address (``conversationId``, ``fromAddress``, when it has them) are
read from the item itself (common.store.sendstatus.sent_record). Nothing
else changes: same table layout, conditions, expiry and replay; the subclass only overrides the
completion write.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord

from common.aws import client
from common.runtime.config import SenderConfig
from common.runtime.log import get_logger
from common.senders.status import SendStatus

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

    from aws_lambda_powertools.utilities.idempotency.hook import IdempotentHookFunction

log = get_logger("sender")
KEY_PREFIX = "send"
# Result fields copied beside powertools' attributes on completion (the SES-id index reads them).
RECORD_FIELDS = ("correlationId", "sesMessageId", "conversationId", "fromAddress")


class SendRecordPersistence(DynamoDBPersistenceLayer):
    """Powertools' DynamoDB persistence whose completion write also stores the send record."""

    def _update_record(self, data_record: DataRecord) -> None:
        result = json.loads(data_record.response_data or "null")
        names = {"#response_data": self.data_attr, "#expiry": self.expiry_attr, "#status": self.status_attr}
        values: dict[str, Any] = {
            ":response_data": {"S": data_record.response_data},
            ":expiry": {"N": str(data_record.expiry_timestamp)},
            ":status": {"S": data_record.status},
        }
        sets = ["#response_data = :response_data", "#expiry = :expiry", "#status = :status"]
        if self.payload_validation_enabled:
            names["#validation_key"], values[":validation_key"] = (
                self.validation_key_attr,
                {"S": data_record.payload_hash},
            )
            sets.append("#validation_key = :validation_key")
        for i, name in enumerate(RECORD_FIELDS):
            value = result.get(name) if isinstance(result, dict) else None
            if isinstance(value, str) and value:
                names[f"#r{i}"], values[f":r{i}"] = name, {"S": value}
                sets.append(f"#r{i} = :r{i}")
        self.client.update_item(
            TableName=self.table_name,
            Key=self._get_key(data_record.idempotency_key),
            UpdateExpression="SET " + ", ".join(sets),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )


def send_exactly_once(
    cfg: SenderConfig, send: Callable[..., dict[str, Any]]
) -> Callable[..., dict[str, Any]]:
    """``send(message=doc, sender=...)`` wrapped in powertools' idempotency, keyed by the message's
    ``idempotency_key``; a completed key returns its stored result with ``status: duplicate``."""

    persistence = SendRecordPersistence(table_name=cfg.idempotency_table, boto3_client=client("dynamodb"))

    def replayed(response: Any, record: Any) -> Any:
        log.info("send skipped", extra={"reason": "idempotency key already completed", "previous": response})
        return {**response, "status": SendStatus.DUPLICATE} if isinstance(response, dict) else response

    config = IdempotencyConfig(
        event_key_jmespath="idempotency_key",
        raise_on_no_idempotency_key=True,
        expires_after_seconds=cfg.idempotency_ttl_s,
        response_hook=cast("IdempotentHookFunction", replayed),
    )
    once = idempotent_function(
        data_keyword_argument="message", persistence_store=persistence, config=config, key_prefix=KEY_PREFIX
    )(send)
    once.idempotency_config = config
    return cast("Callable[..., dict[str, Any]]", once)
