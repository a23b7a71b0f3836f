"""DynamoDB: the one module that talks to the tables (plain dicts in, plain dicts out)."""

from __future__ import annotations

import functools
from typing import Any

from common.aws import client, error_code


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


def get(table: str, key: dict[str, Any], consistent: bool = True) -> dict[str, Any] | None:
    response = client("dynamodb").get_item(TableName=table, Key=to_item(key), ConsistentRead=consistent)
    return from_item(response.get("Item"))


def put(table: str, item: dict[str, Any], condition: str | None = None, names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None) -> bool:
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


class ConditionFailed(Exception):
    """A conditional write did not hold; ``item`` is the item as it was (or None if it did not exist)."""

    def __init__(self, item: dict[str, Any] | None) -> None:
        super().__init__("condition did not hold")
        self.item = item


def update(table: str, key: dict[str, Any], expression: str, values: dict[str, Any] | None = None,
           names: dict[str, str] | None = None, condition: str | None = None,
           return_values: str = "NONE", raise_on_condition: bool = False) -> dict[str, Any] | None:
    """UpdateItem. Returns the requested attributes; None when ``condition`` does not hold, or with
    ``raise_on_condition`` a :class:`ConditionFailed` carrying the current item (no second read)."""
    kwargs: dict[str, Any] = {"TableName": table, "Key": to_item(key), "UpdateExpression": expression,
                              "ReturnValues": return_values}
    if values:
        kwargs["ExpressionAttributeValues"] = to_item(values)
    if names:
        kwargs["ExpressionAttributeNames"] = names
    if condition:
        kwargs["ConditionExpression"] = condition
        if raise_on_condition:
            kwargs["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    try:
        response = client("dynamodb").update_item(**kwargs)
    except Exception as exc:
        if error_code(exc) == "ConditionalCheckFailedException":
            if raise_on_condition:
                raise ConditionFailed(from_item(getattr(exc, "response", {}).get("Item"))) from None
            return None
        raise
    return from_item(response.get("Attributes")) or {}


def delete(table: str, key: dict[str, Any]) -> None:
    client("dynamodb").delete_item(TableName=table, Key=to_item(key))


def query_index(table: str, index: str, key_name: str, key_value: Any, limit: int = 1) -> list[dict[str, Any]]:
    """Items of a global secondary index whose partition key equals ``key_value`` (eventually consistent)."""
    response = client("dynamodb").query(
        TableName=table, IndexName=index, KeyConditionExpression="#k = :v",
        ExpressionAttributeNames={"#k": key_name}, ExpressionAttributeValues=to_item({":v": key_value}), Limit=limit)
    return [i for i in (from_item(item) for item in response.get("Items", [])) if i is not None]
