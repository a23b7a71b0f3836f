"""A CloudFormation template resolved as CloudFormation would for given parameters: the intrinsic
functions the exported template uses (Ref, Fn::GetAtt, Fn::Sub, Fn::If, Fn::Equals, Fn::Join,
Fn::Select, Fn::Split, AWS::NoValue), each resource's Ref and attributes as AWS documents them (the
template reference of each type), so tests compare the result with what the deploy made."""

from __future__ import annotations

import re
from typing import Any

NO_VALUE = object()

# Ref of each type (CloudFormation template reference, "Return values"): the name unless listed here.
REF_IS_ARN = {"AWS::SNS::Topic", "AWS::Lambda::Alias"}


class Resolver:
    def __init__(
        self, template: dict[str, Any], parameters: dict[str, str], account: str, region: str
    ) -> None:
        self.template, self.account, self.region = template, account, region
        self.values: dict[str, Any] = {
            name: parameters.get(name, spec.get("Default")) for name, spec in template["Parameters"].items()
        }
        missing = [n for n, v in self.values.items() if v is None]
        assert not missing, f"no value for the parameters {missing}"
        self.values.update(
            {
                "AWS::AccountId": account,
                "AWS::Region": region,
                "AWS::Partition": "aws",
                "AWS::NoValue": NO_VALUE,
            }
        )
        self.conditions = {n: bool(self.resolve(c)) for n, c in template.get("Conditions", {}).items()}

    # --- what each resource is called and what its attributes are --------------------------------

    def name(self, logical: str) -> str:
        resource = self.template["Resources"][logical]
        kind, props = resource["Type"], resource["Properties"]
        key = {
            "AWS::SQS::Queue": "QueueName",
            "AWS::SNS::Topic": "TopicName",
            "AWS::DynamoDB::Table": "TableName",
            "AWS::IAM::Role": "RoleName",
            "AWS::Lambda::Function": "FunctionName",
            "AWS::Events::Rule": "Name",
            "AWS::S3::Bucket": "BucketName",
            "AWS::SES::ReceiptRuleSet": "RuleSetName",
            "AWS::SES::ConfigurationSet": "Name",
        }.get(kind)
        if kind == "AWS::SES::ReceiptRule":
            return str(self.resolve(props["Rule"]["Name"]))
        assert key, f"{logical}: no name for {kind}"
        return str(self.resolve(props[key]))

    def ref(self, logical: str) -> str:
        kind = self.template["Resources"][logical]["Type"]
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{self.region}.amazonaws.com/{self.account}/{self.name(logical)}"
        if kind in REF_IS_ARN:
            return self.arn(logical)
        return self.name(logical)

    def arn(self, logical: str) -> str:
        resource = self.template["Resources"][logical]
        kind, a, r = resource["Type"], self.account, self.region
        if kind == "AWS::Lambda::Alias":
            function = self.resolve(resource["Properties"]["FunctionName"])
            name = self.resolve(resource["Properties"]["Name"])
            return f"arn:aws:lambda:{r}:{a}:function:{function}:{name}"
        prefix = {
            "AWS::SQS::Queue": f"arn:aws:sqs:{r}:{a}:",
            "AWS::SNS::Topic": f"arn:aws:sns:{r}:{a}:",
            "AWS::DynamoDB::Table": f"arn:aws:dynamodb:{r}:{a}:table/",
            "AWS::IAM::Role": f"arn:aws:iam::{a}:role/",
            "AWS::Lambda::Function": f"arn:aws:lambda:{r}:{a}:function:",
            "AWS::Events::Rule": f"arn:aws:events:{r}:{a}:rule/",
        }[kind]
        return prefix + self.name(logical)

    def attribute(self, logical: str, attribute: str) -> Any:
        if attribute == "Arn":
            return self.arn(logical)
        if attribute == "Version":  # the first version Lambda publishes
            return "1"
        raise AssertionError(f"{logical}.{attribute} is not modelled")

    # --- intrinsic functions -------------------------------------------------------------------

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [v for v in (self.resolve(i) for i in value) if v is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self.values[arg] if arg in self.values else self.ref(arg)
            if key == "Fn::GetAtt":
                return self.attribute(*arg)
            if key == "Fn::Sub":
                return self._sub(*(arg if isinstance(arg, list) else [arg, {}]))
            if key == "Fn::If":
                return self.resolve(arg[1] if self.conditions[arg[0]] else arg[2])
            if key == "Fn::Equals":
                return self.resolve(arg[0]) == self.resolve(arg[1])
            if key == "Fn::Join":
                return arg[0].join(self.resolve(arg[1]))
            if key == "Fn::Select":
                return self.resolve(arg[1])[int(arg[0])]
            if key == "Fn::Split":
                return str(self.resolve(arg[1])).split(arg[0])
        out = {k: self.resolve(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not NO_VALUE}

    def _sub(self, text: str, variables: dict[str, Any]) -> str:
        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return str(self.resolve(variables[name]))
            if "." in name:
                return str(self.attribute(*name.split(".", 1)))
            return str(self.resolve({"Ref": name}))

        return re.sub(r"\$\{([^}]+)\}", one, text)

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        """Every resource of ``kind``, by logical id, its properties resolved."""
        return {
            logical: self.resolve(r["Properties"])
            for logical, r in self.template["Resources"].items()
            if r["Type"] == kind
        }
