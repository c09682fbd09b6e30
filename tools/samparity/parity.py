#!/usr/bin/env python3
"""Parity of template.yaml (SAM) with the synthesized CDK stack.

Usage: parity.py TEMPLATE.yaml CDK.template.json
       parity.py --selftest TEMPLATE.yaml CDK.template.json

Transforms template.yaml offline with samtranslator (the copy cfn-lint
ships), resolves both templates with their default parameters, and
compares a model of what matters: resource type counts, queues (redrive,
visibility, size, retention, encryption), event source mappings, functions
(runtime, architecture, handler, memory, timeout, environment variable
names, DLQ, logging), each function's IAM statements (action, resource) and
the topic, key and queue policy conditions. Any difference is printed as a
unified diff and the exit status is 1. Intended differences are applied to
the CDK model in INTENDED below, each with its reason, so they show in code.
--selftest plants drifts in template.yaml and checks that each is caught.
"""
import copy
import difflib
import json
import os
import re
import sys

import yaml
from samtranslator.translator.transform import transform


# ---------------------------------------------------------------- loading

class _CfnLoader(yaml.SafeLoader):
    pass


def _tag(name):
    def construct(loader, node):
        if isinstance(node, yaml.ScalarNode):
            v = loader.construct_scalar(node)
            if name == "GetAtt":
                return {"Fn::GetAtt": v.split(".", 1)}
        elif isinstance(node, yaml.SequenceNode):
            v = loader.construct_sequence(node, deep=True)
        else:
            v = loader.construct_mapping(node, deep=True)
        return {"Ref": v} if name == "Ref" else {"Fn::" + name: v}
    return construct


for _n in ["Ref", "GetAtt", "Sub", "Join", "Select", "Split", "If", "Equals", "Not", "And", "Or",
           "FindInMap", "Base64", "Cidr", "GetAZs", "ImportValue", "Condition"]:
    _CfnLoader.add_constructor("!" + _n, _tag(_n))


class _NoPolicies:
    def load(self):
        return {}


def sam_transform(tpl):
    tpl = copy.deepcopy(tpl)
    for r in tpl["Resources"].values():
        if r["Type"] == "AWS::Serverless::Function":
            r["Properties"]["CodeUri"] = "s3://placeholder/code.zip"  # as cfn-lint does
    # Offline: no credentials or config are read; the region is a placeholder.
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    return transform(tpl, {}, _NoPolicies())


# ---------------------------------------------------------------- resolving

class Resolver:
    """Evaluates intrinsics with the default parameters; what cannot be
    known before deployment renders as a ${...} placeholder string."""

    def __init__(self, tpl, names):
        self.t = tpl
        self.names = names  # logical ID -> common name
        self.params = {k: v.get("Default") for k, v in tpl.get("Parameters", {}).items()}
        self.cond = {}
        for k in tpl.get("Conditions", {}):
            self.cond[k] = None
        for k in tpl.get("Conditions", {}):
            self.cond[k] = self.condition(k)

    def condition(self, name):
        if self.cond.get(name) is None:
            self.cond[name] = bool(self.v(self.t["Conditions"][name]))
        return self.cond[name]

    def name(self, lid):
        return self.names.get(lid, lid)

    def v(self, x):
        if isinstance(x, list):
            return [y for y in (self.v(i) for i in x) if y is not NOVALUE]
        if not isinstance(x, dict):
            return x
        if len(x) == 1:
            (k, a), = x.items()
            if k == "Ref":
                if a == "AWS::NoValue":
                    return NOVALUE
                if a in self.params:
                    return self.params[a]
                return "${%s}" % self.name(a)
            if k == "Fn::GetAtt":
                lid, attr = a if isinstance(a, list) else a.split(".", 1)
                return "${%s.%s}" % (self.name(lid), attr)
            if k == "Fn::Join":
                parts = self.v(a[1])
                return self.v(a[0]).join(str(p) for p in parts)
            if k == "Fn::Sub":
                s, vars_ = (a, {}) if isinstance(a, str) else (a[0], a[1])
                vars_ = {n: self.v(e) for n, e in vars_.items()}

                def rep(m):
                    n = m.group(1)
                    if n in vars_:
                        return str(vars_[n])
                    if n in self.params:
                        return str(self.params[n])
                    if "." in n:
                        lid, attr = n.split(".", 1)
                        return "${%s.%s}" % (self.name(lid), attr)
                    return "${%s}" % self.name(n)
                return re.sub(r"\$\{([^!}][^}]*)\}", rep, s)
            if k == "Fn::Select":
                i, lst = self.v(a[0]), self.v(a[1])
                return lst[int(i)] if isinstance(lst, list) else "${Select(%s,%s)}" % (i, lst)
            if k == "Fn::Split":
                sep, s = self.v(a[0]), self.v(a[1])
                if s == "${AWS::StackId}" and sep == "/":
                    return ["${StackIdHead}", "${StackName}", "${StackIdSuffix}"]
                return s.split(sep)
            if k == "Fn::If":
                return self.v(a[1] if self.condition(a[0]) else a[2])
            if k == "Fn::Equals":
                return str(self.v(a[0])) == str(self.v(a[1]))
            if k == "Fn::Not":
                return not self.v(a[0])
            if k == "Fn::And":
                return all(self.v(c) for c in a)
            if k == "Fn::Or":
                return any(self.v(c) for c in a)
            if k in ("Condition", "Fn::Condition"):  # the YAML loader writes !Condition as Fn::Condition
                return self.condition(a)
            if k == "Fn::FindInMap":
                m, top, second = (str(self.v(p)) for p in a)
                return self.t["Mappings"][m][top][second]
        return {k: y for k, y in ((k, self.v(y)) for k, y in x.items()) if y is not NOVALUE}

    def resources(self):
        for lid, r in self.t["Resources"].items():
            if "Condition" in r and not self.condition(r["Condition"]):
                continue
            yield lid, r["Type"], self.v(r.get("Properties", {}))


NOVALUE = object()


def canon(s):
    """One spelling for values the two stacks write differently."""
    if not isinstance(s, str):
        return s
    # The generated bucket name: CDK adds its construct address.
    s = re.sub(r"s3sqs(-[0-9a-f]{8})?-\$\{StackIdSuffix\}", "${SourceBucket}", s)
    s = s.replace("arn:${AWS::Partition}:s3:::${SourceBucket}", "${SourceBucket.Arn}")
    # Queue ARNs built by hand (as SAM policy templates do).
    s = re.sub(r"arn:\$\{AWS::Partition\}:sqs:\$\{AWS::Region\}:\$\{AWS::AccountId\}:\$\{(\w+)\.QueueName\}",
               r"${\1.Arn}", s)
    return s


def common_names(tpl, cdk):
    """CDK logical IDs (S3SQS<Path><hash8>) to the SAM template's names."""
    out = {}
    for lid, r in tpl["Resources"].items():
        n = lid
        if cdk:
            n = re.sub(r"^S3SQS", "", lid)
            n = re.sub(r"[0-9A-F]{8}$", "", n)
            if r["Type"] == "AWS::Lambda::Function":
                n += "Function"
            if r["Type"] == "AWS::Lambda::EventSourceMapping":
                n = "ESM:" + re.sub(r"SqsEventSource.*", "", n)
            if r["Type"] == "AWS::SNS::Subscription":
                n = "IngestSubscription"
        else:
            if r["Type"] == "AWS::Lambda::EventSourceMapping":
                n = "ESM:" + re.sub(r"Function.*", "", n)
        out[lid] = n
    return out


# ---------------------------------------------------------------- the model

COUNTED = {"AWS::SQS::Queue", "AWS::SQS::QueuePolicy", "AWS::SNS::Topic", "AWS::SNS::TopicPolicy",
           "AWS::SNS::Subscription", "AWS::S3::Bucket", "AWS::S3::BucketPolicy", "AWS::KMS::Key",
           "AWS::Lambda::Function", "AWS::Lambda::EventSourceMapping", "AWS::CloudWatch::Alarm",
           "AWS::Logs::LogGroup", "AWS::IAM::Role", "AWS::CloudWatch::Dashboard", "AWS::DynamoDB::Table"}


def statements(doc):
    sts = doc.get("Statement", [])
    return sts if isinstance(sts, list) else [sts]


def as_list(x):
    return x if isinstance(x, list) else [x]


def model(tpl, cdk):
    names = common_names(tpl, cdk)
    R = Resolver(tpl, names)
    res = list(R.resources())
    m = {"counts": {}, "queues": {}, "event_sources": {}, "functions": {}, "iam": {},
         "resource_policies": {}, "buckets": {}, "alarms": {}}
    role_of = {}
    for lid, typ, p in res:
        n = names[lid]
        if typ in COUNTED:
            m["counts"][typ] = m["counts"].get(typ, 0) + 1
        if typ == "AWS::SQS::Queue":
            rp = p.get("RedrivePolicy") or {}
            m["queues"][n] = {
                "VisibilityTimeout": int(p.get("VisibilityTimeout", 30)),
                "maxReceiveCount": int(rp["maxReceiveCount"]) if rp else None,
                "deadLetterTarget": canon(rp.get("deadLetterTargetArn")),
                "MaximumMessageSize": int(p.get("MaximumMessageSize", 262144)),
                "MessageRetentionPeriod": int(p.get("MessageRetentionPeriod", 345600)),
                "SqsManagedSseEnabled": p.get("SqsManagedSseEnabled"),
                "KmsMasterKeyId": canon(p.get("KmsMasterKeyId")),
                "FifoQueue": p.get("FifoQueue", False),
            }
        elif typ == "AWS::Lambda::EventSourceMapping":
            m["event_sources"][n] = {
                "EventSource": canon(p.get("EventSourceArn")),
                "Function": canon(p.get("FunctionName")),
                "BatchSize": int(p.get("BatchSize", 10)),
                "MaximumBatchingWindowInSeconds": p.get("MaximumBatchingWindowInSeconds", 0),
                "FunctionResponseTypes": p.get("FunctionResponseTypes", []),
                "ScalingConfig": p.get("ScalingConfig"),
                "Enabled": p.get("Enabled", True),
            }
        elif typ == "AWS::Lambda::Function":
            env = (p.get("Environment") or {}).get("Variables") or {}
            m["functions"][n] = {
                "Runtime": p.get("Runtime"),
                "Architectures": p.get("Architectures"),
                "Handler": p.get("Handler"),
                "MemorySize": int(p.get("MemorySize", 128)),
                "Timeout": int(p.get("Timeout", 3)),
                "EnvironmentNames": sorted(env),
                "DeadLetterTarget": canon((p.get("DeadLetterConfig") or {}).get("TargetArn")),
                "LoggingConfig": {k: canon(v) for k, v in (p.get("LoggingConfig") or {}).items()},
                "Role": canon(p.get("Role")),
                # SAM writes TracingConfig {Mode: NoValue} when tracing is off: none.
                "TracingConfig": p.get("TracingConfig") or None,
                "Layers": [canon(l) for l in p.get("Layers") or []],
            }
            role_of[canon(p.get("Role"))] = n
        elif typ in ("AWS::SNS::TopicPolicy", "AWS::SQS::QueuePolicy", "AWS::S3::BucketPolicy", "AWS::KMS::Key"):
            doc = p.get("PolicyDocument") or p.get("KeyPolicy")
            m["resource_policies"][n] = sorted(
                json.dumps({"Effect": s["Effect"], "Principal": s.get("Principal"),
                            "Action": sorted(as_list(s["Action"])),
                            "Resource": sorted(canon(r) for r in as_list(s["Resource"])),
                            "Condition": json.loads(canon(json.dumps(s.get("Condition"))))},
                           sort_keys=True) for s in statements(doc))
        elif typ == "AWS::CloudWatch::Alarm":
            dims = sorted("%s=%s" % (d["Name"], canon(d["Value"]) if not isinstance(d["Value"], str) else canon(d["Value"]))
                          for d in p.get("Dimensions", []))
            key = "%s %s %s" % (p.get("Namespace"), p.get("MetricName"), ",".join(dims))
            m["alarms"][key] = {k: p.get(k) for k in ("Statistic", "Period", "EvaluationPeriods", "ComparisonOperator", "TreatMissingData")}
            m["alarms"][key]["Threshold"] = float(p.get("Threshold"))
        elif typ == "AWS::S3::Bucket":
            m["buckets"][n] = json.loads(canon(json.dumps({k: v for k, v in p.items() if k != "BucketName"})))
    # IAM: every Allow (action, resource) pair of each function's role,
    # from the role's inline policies, its managed policies and
    # AWS::IAM::Policy resources attached to it.
    pairs = {}
    for lid, typ, p in res:
        n = names[lid]
        if typ == "AWS::IAM::Role":
            fn = role_of.get("${%s.Arn}" % n, n)
            bucket = pairs.setdefault(fn, set())
            for mp in p.get("ManagedPolicyArns", []):
                bucket.add(("MANAGED POLICY", canon(mp)))
            for pol in p.get("Policies", []):
                for s in statements(pol["PolicyDocument"]):
                    for a in as_list(s["Action"]):
                        for r in as_list(s["Resource"]):
                            bucket.add((s["Effect"] + " " + a, canon(r), json.dumps(s.get("Condition"), sort_keys=True)))
    for lid, typ, p in res:
        if typ == "AWS::IAM::Policy":
            for role in p["Roles"]:
                rn = canon(role).strip("${}")
                fn = role_of.get("${%s.Arn}" % rn, rn)
                bucket = pairs.setdefault(fn, set())
                for s in statements(p["PolicyDocument"]):
                    for a in as_list(s["Action"]):
                        for r in as_list(s["Resource"]):
                            bucket.add((s["Effect"] + " " + a, canon(r), json.dumps(s.get("Condition"), sort_keys=True)))
    m["iam"] = {fn: sorted(" ".join(x) for x in v) for fn, v in pairs.items()}
    return m


# Differences on purpose. Each is either normalized away in canon() or
# outside the model, and named here so that the output says so. Add a
# function to INTENDED_FIXUPS (applied to the CDK model) for a difference
# inside the model.
INTENDED = [
    "new bucket name: CDK inserts its construct address (s3sqs-<addr8>-<stack id>), SAM uses s3sqs-<stack id> (canon())",
    "alarm descriptions name the CDK construct path or the SAM stack name (not compared)",
    "existing bucket: CDK adds a notifications custom resource; SAM leaves the notification to the user (not in the default model)",
]
INTENDED_FIXUPS = []


# ---------------------------------------------------------------- compare

def compare(sam_tpl, cdk_tpl):
    sam = model(sam_transform(sam_tpl), cdk=False)
    cdk = model(cdk_tpl, cdk=True)
    for f in INTENDED_FIXUPS:
        f(cdk)
    a = json.dumps(cdk, indent=1, sort_keys=True).splitlines()
    b = json.dumps(sam, indent=1, sort_keys=True).splitlines()
    return list(difflib.unified_diff(a, b, "CDK (.local/cdk.out)", "SAM (template.yaml, transformed)", lineterm="", n=4))


def load_sam(path):
    with open(path) as f:
        return yaml.load(f, Loader=_CfnLoader)


# Planted drifts for --selftest: each must make compare() report a diff.
def _drifts():
    def res(t, n):
        return t["Resources"][n]["Properties"]

    def fanout_wider(t):
        # The target statement: exactly GetQueueUrl and SendMessage.
        sts = res(t, "FanoutRole")["Policies"][0]["PolicyDocument"]["Statement"]
        st = next(s for s in sts if isinstance(s, dict) and "sqs:GetQueueUrl" in s.get("Action", []) and "sqs:SendMessage" in s["Action"])
        st["Action"].append("sqs:GetQueueAttributes")

    def topic_condition(t):
        del res(t, "TopicPolicy")["PolicyDocument"]["Statement"][1]["Condition"]["StringEquals"]

    yield "IngestBatchSize default 10 -> 5", lambda t: t["Parameters"]["IngestBatchSize"].update(Default=5)
    yield "no ReportBatchItemFailures on fanout", lambda t: res(t, "FanoutFunction")["Events"]["WorkQueue"]["Properties"].pop("FunctionResponseTypes")
    yield "MaxReceiveCount default 5 -> 3", lambda t: t["Parameters"]["MaxReceiveCount"].update(Default=3)
    yield "work queue age alarm at 900 s", lambda t: t["Parameters"]["FanoutTaskAgeAlarmSeconds"].update(Default=900)
    yield "no throttles alarm on fanout", lambda t: t["Resources"].pop("FanoutThrottlesAlarm")
    yield "ingest visibility not 6x timeout", lambda t: t["Mappings"]["VisibilityFor"]["120"].update(Seconds=120)
    yield "fanout gets sqs:GetQueueAttributes on the target", fanout_wider
    yield "topic policy loses aws:SourceAccount", topic_condition
    yield "s3ingest on x86_64", lambda t: res(t, "S3IngestFunction").update(Architectures=["x86_64"])
    yield "s3ingest runtime provided.al2", lambda t: res(t, "S3IngestFunction").update(Runtime="provided.al2")
    yield "fanout env WORK_QUEUE_URL renamed", lambda t: res(t, "FanoutFunction")["Environment"]["Variables"].update(
        WORK_QUEUE=res(t, "FanoutFunction")["Environment"]["Variables"].pop("WORK_QUEUE_URL"))
    yield "SAM-generated role (managed policies)", lambda t: (res(t, "S3IngestFunction").pop("Role"),
                                                             res(t, "S3IngestFunction").update(Policies=[{"SQSPollerPolicy": {"QueueName": {"Fn::GetAtt": ["IngestQueue", "QueueName"]}}}]))
    yield "an extra queue", lambda t: t["Resources"].update(Extra={"Type": "AWS::SQS::Queue", "Properties": {}})


def main(argv):
    selftest = argv[1:2] == ["--selftest"]
    if selftest:
        argv = argv[1:]
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    sam_tpl = load_sam(argv[1])
    with open(argv[2]) as f:
        cdk_tpl = json.load(f)
    diff = compare(sam_tpl, cdk_tpl)
    if diff:
        print("template.yaml and the CDK stack differ (- CDK, + SAM):")
        print("\n".join(diff))
        print("\nFix template.yaml or infra/, or name the difference in INTENDED in %s." % __file__)
        return 1
    if not selftest:
        print("parity: template.yaml matches the CDK stack; intended differences:")
        for d in INTENDED:
            print("  - " + d)
        return 0
    missed = []
    for what, plant in _drifts():
        t = copy.deepcopy(sam_tpl)
        plant(t)
        if not compare(t, cdk_tpl):
            missed.append(what)
        else:
            print("selftest: caught: " + what)
    if missed:
        print("selftest: NOT caught: " + "; ".join(missed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
