"""DynamoDB: the one module that talks to the tables (plain dicts in, plain dicts out)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from common.aws import client, error_code
from common.errors import EmailHandlerError


@functools.cache
def _codec() -> tuple[Any, Any]:
    from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

    return TypeSerializer(), TypeDeserializer()


def to_item(values: dict[str, Any]) -> dict[str, Any]:
    ser = _codec()[0]
    return {k: ser.serialize(v) for k, v in values.items() if v is not None}


def from_item(item: dict[str, Any] | None) -> dict[str, Any] | None:
    if item is None:
        return None
    de = _codec()[1]
    out = {k: de.deserialize(v) for k, v in item.items()}
    # Numbers come back as Decimal; everything this project stores is integral.
    return {k: (int(v) if type(v).__name__ == "Decimal" else v) for k, v in out.items()}


# DynamoDB refuses a partition key over 2,048 bytes (a sort key over 1,024) with a ValidationException,
# on reads as on writes. Every key this project builds is far shorter (ids, hashed or capped
# addresses), so a longer one is a bug upstream: refused here, with the same error on every stack.
MAX_KEY_BYTES = 1024


class KeyTooLongError(EmailHandlerError, ValueError):
    """A key over DynamoDB's size limit: a bug upstream, refused before the call."""


def check_key(table: str, key: dict[str, Any]) -> dict[str, Any]:
    for name, value in key.items():
        size = len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else len(str(value))
        if size > MAX_KEY_BYTES:
            raise KeyTooLongError(
                f"{table}: key {name} is {size} bytes (this project's limit is {MAX_KEY_BYTES})"
            )
    return key


def get(table: str, key: dict[str, Any], consistent: bool = True) -> dict[str, Any] | None:
    response = client("dynamodb").get_item(
        TableName=table, Key=to_item(check_key(table, key)), ConsistentRead=consistent
    )
    return from_item(response.get("Item"))


BATCH_GET_KEYS = 100  # BatchGetItem's limit per request
BATCH_GET_ATTEMPTS = 5


def batch_get(
    table: str,
    keys: list[dict[str, Any]],
    consistent: bool = True,
    sleep: Callable[[float], None] = time.sleep,
) -> list[dict[str, Any]]:
    """The items of ``table`` with these keys (missing ones are left out), in one BatchGetItem per
    100 distinct keys. Keys DynamoDB returns as unprocessed (throttling, size) are asked for again
    after 50, 100, 200 ms ...; still unprocessed after five requests, it raises."""
    distinct = list(
        {repr(sorted(k.items())): check_key(table, k) for k in keys}.values()
    )  # a key twice is a ValidationException
    found: list[dict[str, Any]] = []
    for start in range(0, len(distinct), BATCH_GET_KEYS):
        request: dict[str, Any] = {
            table: {
                "Keys": [to_item(k) for k in distinct[start : start + BATCH_GET_KEYS]],
                "ConsistentRead": consistent,
            }
        }
        for attempt in range(BATCH_GET_ATTEMPTS):
            if attempt:
                sleep(0.05 * 2 ** (attempt - 1))
            response = client("dynamodb").batch_get_item(RequestItems=request)
            found += [
                i for i in map(from_item, response.get("Responses", {}).get(table, [])) if i is not None
            ]
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
        else:
            raise UnprocessedKeysError(
                f"BatchGetItem left {len(request[table]['Keys'])} key(s) of {table} unprocessed "
                f"after {BATCH_GET_ATTEMPTS} requests"
            )
    return found


def put(
    table: str,
    item: dict[str, Any],
    condition: str | None = None,
    names: dict[str, str] | None = None,
    values: dict[str, Any] | None = None,
) -> bool:
    """PutItem; with a condition, return False instead of raising when it does not hold."""
    kwargs: dict[str, Any] = {"TableName": table, "Item": to_item(item)}
    if condition:
        kwargs["ConditionExpression"] = condition
    if names:
        kwargs["ExpressionAttributeNames"] = names
    if values:
        kwargs["ExpressionAttributeValues"] = to_item(values)
    try:
        client("dynamodb").put_item(**kwargs)
    except Exception as exc:
        if error_code(exc) == "ConditionalCheckFailedException":
            return False
        raise
    return True


class UnprocessedKeysError(EmailHandlerError, RuntimeError):
    """BatchGetItem still left keys unprocessed after every retry (throttled throughout)."""


class ConditionFailedError(EmailHandlerError):
    """A conditional write did not hold; ``item`` is the item as it was (or None if it did not exist)."""

    def __init__(self, item: dict[str, Any] | None) -> None:
        super().__init__("condition did not hold")
        self.item = item


def update(
    table: str,
    key: dict[str, Any],
    expression: str,
    values: dict[str, Any] | None = None,
    names: dict[str, str] | None = None,
    condition: str | None = None,
    return_values: str = "NONE",
    raise_on_condition: bool = False,
) -> dict[str, Any] | None:
    """UpdateItem. Returns the requested attributes; None when ``condition`` does not hold, or with
    ``raise_on_condition`` a :class:`ConditionFailedError` carrying the current item (no second read)."""
    action = update_action(table, key, expression, condition=condition, names=names, values=values)
    kwargs = {**action["Update"]}
    kwargs["ReturnValues"] = return_values
    if not raise_on_condition:
        kwargs.pop("ReturnValuesOnConditionCheckFailure", None)
    try:
        response = client("dynamodb").update_item(**kwargs)
    except Exception as exc:
        if error_code(exc) == "ConditionalCheckFailedException":
            if raise_on_condition:
                raise ConditionFailedError(from_item(getattr(exc, "response", {}).get("Item"))) from None
            return None
        raise
    return from_item(response.get("Attributes")) or {}


def condition_check(
    table: str,
    key: dict[str, Any],
    condition: str,
    names: dict[str, str] | None = None,
    values: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ConditionCheck action for :func:`transact_write` (IAM: ``dynamodb:ConditionCheckItem``)."""
    return {"ConditionCheck": _action(table, key, condition, names, values)}


def update_action(
    table: str,
    key: dict[str, Any],
    expression: str,
    *,
    condition: str | None = None,
    names: dict[str, str] | None = None,
    values: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An Update action for :func:`transact_write` (IAM: ``dynamodb:UpdateItem``)."""
    return {"Update": {**_action(table, key, condition, names, values), "UpdateExpression": expression}}


def _action(
    table: str,
    key: dict[str, Any],
    condition: str | None,
    names: dict[str, str] | None,
    values: dict[str, Any] | None,
) -> dict[str, Any]:
    action: dict[str, Any] = {"TableName": table, "Key": to_item(check_key(table, key))}
    if condition:
        action["ConditionExpression"] = condition
        action["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    if names:
        action["ExpressionAttributeNames"] = names
    if values:
        action["ExpressionAttributeValues"] = to_item(values)
    return action


class TransactionCancelledError(EmailHandlerError):
    """TransactWriteItems wrote nothing. ``reasons`` has one ``(code, item)`` per action, in order:
    code ``"None"`` where that action raised no error, ``"ConditionalCheckFailed"`` (with the item
    as it was, None if it did not exist) where its condition did not hold, ``"TransactionConflict"``,
    ``"ThrottlingError"`` … otherwise (API_CancellationReason)."""

    def __init__(self, reasons: list[tuple[str, dict[str, Any] | None]]) -> None:
        super().__init__(f"transaction cancelled: {[code for code, _ in reasons]}")
        self.reasons = reasons


def transact_write(actions: list[dict[str, Any]]) -> None:
    """All of ``actions`` (at most 100, each on another item) or none, in one TransactWriteItems;
    raises :class:`TransactionCancelledError` when DynamoDB cancels it."""
    try:
        client("dynamodb").transact_write_items(TransactItems=actions)
    except Exception as exc:
        if error_code(exc) != "TransactionCanceledException":
            raise
        given = getattr(exc, "response", {}).get("CancellationReasons") or []
        reasons = [(str(r.get("Code") or "None"), from_item(r.get("Item"))) for r in given]
        raise TransactionCancelledError(reasons) from None


def delete(table: str, key: dict[str, Any], return_old: bool = False) -> dict[str, Any] | None:
    """DeleteItem; with ``return_old`` the item as it was (None if there was none)."""
    response = client("dynamodb").delete_item(
        TableName=table, Key=to_item(check_key(table, key)), ReturnValues="ALL_OLD" if return_old else "NONE"
    )
    return from_item(response.get("Attributes"))


def query_index(
    table: str, index: str, key_name: str, key_value: Any, limit: int = 1
) -> list[dict[str, Any]]:
    """Items of a global secondary index whose partition key equals ``key_value`` (eventually consistent)."""
    response = client("dynamodb").query(
        TableName=table,
        IndexName=index,
        KeyConditionExpression="#k = :v",
        ExpressionAttributeNames={"#k": key_name},
        ExpressionAttributeValues=to_item({":v": key_value}),
        Limit=limit,
    )
    return [i for i in (from_item(item) for item in response.get("Items", [])) if i is not None]


def scan(table: str, attributes: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Every item of a (small) table: operator tools only, never a handler's per-mail path.
    ``attributes``: only those (a ProjectionExpression; each name through ExpressionAttributeNames, so
    a reserved word such as ``timestamp`` works)."""
    items: list[dict[str, Any]] = []
    projection: dict[str, Any] = (
        {
            "ProjectionExpression": ", ".join(f"#a{n}" for n in range(len(attributes))),
            "ExpressionAttributeNames": {f"#a{n}": a for n, a in enumerate(attributes)},
        }
        if attributes
        else {}
    )
    for page in client("dynamodb").get_paginator("scan").paginate(TableName=table, **projection):
        items += [i for i in (from_item(item) for item in page.get("Items", [])) if i is not None]
    return items


def query_all(table: str, index: str, key_name: str, key_value: Any) -> list[dict[str, Any]]:
    """Every item of a global secondary index partition, all pages."""
    items: list[dict[str, Any]] = []
    for page in (
        client("dynamodb")
        .get_paginator("query")
        .paginate(
            TableName=table,
            IndexName=index,
            KeyConditionExpression="#k = :v",
            ExpressionAttributeNames={"#k": key_name},
            ExpressionAttributeValues=to_item({":v": key_value}),
        )
    ):
        items += [i for i in (from_item(item) for item in page.get("Items", [])) if i is not None]
    return items
