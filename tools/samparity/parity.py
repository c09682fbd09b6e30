#!/usr/bin/env python3
"""Parity of template.yaml (SAM) with the synthesized CDK stack, at several
parameter sets.

Usage:
  parity.py [--selftest] --sets SETS.json --cdk CDK_OUT --cdk-sets SETS_OUT TEMPLATE.yaml
  parity.py --list-sets SETS.json        names of the sets to synthesize (all but "defaults")
  parity.py --context SETS.json NAME     the set's `-c key=value` words for `cdk synth`

SETS.json (tools/samparity/sets.json) is the one table of parameter sets:
each set names the CDK context and the template.yaml parameter values of
the same deployment. The "defaults" set is compared with
CDK_OUT/S3Sqs.template.json, every other set with
SETS_OUT/<name>/S3Sqs.template.json (`make test-infra` synthesizes them).

For each set, template.yaml is transformed offline with samtranslator (the
copy cfn-lint ships) and both templates are resolved with the set's
parameter values; then a model of what matters is compared: resource type
counts and deletion policies, queues (redrive, visibility, size, retention,
encryption, FIFO), topics' subscriptions, buckets (everything but the
name), keys, log groups, the claims table, alarms (metric, threshold,
actions), event source mappings, functions (runtime, architecture, handler,
memory, timeout, every environment variable and its value, DLQ, logging,
role), each function's IAM grants as (action, resource, condition) triples,
resource policies (topic, queue, bucket, key), and the stack's outputs. Any
difference is printed as a unified diff and the exit status is 1.

It also checks that nothing is left out: every CDK context key (read from
infra/context.go) maps to SAM parameters in CONTEXT_PARAMETERS or is named
in CDK_ONLY with its reason, every template parameter is mapped, each set
sets both sides of each mapping, every parameter takes a non-default value
in some set, and the settings tables of docs/deploy-cdk.md and
docs/deploy-sam.md list exactly the context keys and the parameters.

Intended differences are applied to the CDK model in INTENDED_FIXUPS, or
normalized in canon(), and listed in INTENDED, each with its reason, so they
show in code. --selftest plants drifts in template.yaml and checks that each
is caught, some only at a non-default set.
"""
import copy
import difflib
import json
import logging
import os
import re
import sys

import yaml

# samtranslator warns about its own unpublished metrics on every transform.
logging.getLogger("samtranslator.metrics").setLevel(logging.ERROR)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STACK = "S3Sqs.template.json"


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
           "FindInMap", "Base64", "Cidr", "GetAZs", "ImportValue", "Condition",
           # Rules only.
           "Contains", "EachMemberEquals", "EachMemberIn", "RefAll", "ValueOf", "ValueOfAll"]:
    _CfnLoader.add_constructor("!" + _n, _tag(_n))


class _NoPolicies:
    def load(self):
        return {}


def sam_transform(tpl):
    # Imported here so that operator.py, which reads the template without
    # transforming it, needs only PyYAML.
    from samtranslator.translator.transform import transform
    tpl = copy.deepcopy(tpl)
    for r in tpl["Resources"].values():
        if r["Type"] == "AWS::Serverless::Function":
            r["Properties"]["CodeUri"] = "s3://placeholder/code.zip"  # as cfn-lint does
    # Offline: no credentials or config are read; the region is a placeholder.
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    return transform(tpl, {}, _NoPolicies())


def load_sam(path):
    with open(path) as f:
        return yaml.load(f, Loader=_CfnLoader)


# ---------------------------------------------------------------- resolving

class Resolver:
    """Evaluates intrinsics with the parameters' defaults, or the values
    given; what cannot be known before deployment renders as a ${...}
    placeholder string."""

    def __init__(self, tpl, names, values=None):
        self.t = tpl
        self.names = names  # logical ID -> common name
        values = values or {}
        params = tpl.get("Parameters", {})
        unknown = sorted(set(values) - set(params))
        if unknown:
            raise ValueError("no such parameters: %s" % ", ".join(unknown))
        self.params = {}
        for k, p in params.items():
            v = values.get(k, p.get("Default"))
            if p.get("Type") == "CommaDelimitedList" and not isinstance(v, list):
                v = ("" if v is None else str(v)).split(",")
            elif p.get("Type") == "Number" and isinstance(v, str) and re.fullmatch(r"-?[0-9]+", v):
                v = int(v)
            self.params[k] = v
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
            yield lid, r, self.v(r.get("Properties", {}))

    def outputs(self):
        for k, o in self.t.get("Outputs", {}).items():
            if "Condition" in o and not self.condition(o["Condition"]):
                continue
            yield k, self.v(o["Value"])


NOVALUE = object()


def canon(s):
    """One spelling for values the two stacks write differently; applied
    to every string of the model."""
    if isinstance(s, list):
        return [canon(x) for x in s]
    if isinstance(s, dict):
        return {k: canon(v) for k, v in s.items()}
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
           "AWS::Logs::LogGroup", "AWS::IAM::Role", "AWS::IAM::ManagedPolicy", "AWS::DynamoDB::Table", "AWS::CloudWatch::Dashboard"}


def statements(doc):
    sts = doc.get("Statement", [])
    return sts if isinstance(sts, list) else [sts]


def as_list(x):
    return x if isinstance(x, list) else [x]


def conditions(c):
    """A statement's condition as one or more equivalent conditions: a
    single operator and key with several values (which IAM ORs) becomes one
    condition per value, so that one statement listing two prefixes equals
    two statements with one each. Values are always lists."""
    if not c:
        return [None]
    if len(c) == 1:
        (op, kv), = c.items()
        if len(kv) == 1 and not op.startswith("ForAllValues"):
            (k, vals), = kv.items()
            return [{op: {k: [v]}} for v in as_list(vals)]
    return [{op: {k: sorted(as_list(v)) for k, v in kv.items()} for op, kv in c.items()}]


def grants(sts):
    for s in sts:
        for a in as_list(s["Action"]):
            for r in as_list(s["Resource"]):
                for c in conditions(canon(s.get("Condition"))):
                    yield (s["Effect"] + " " + a, canon(str(r)), json.dumps(c, sort_keys=True))


def model(tpl, cdk, values=None):
    names = common_names(tpl, cdk)
    R = Resolver(tpl, names, values)
    res = list(R.resources())
    m = {"counts": {}, "resources": {}, "queues": {}, "subscriptions": {}, "event_sources": {}, "functions": {},
         "iam": {}, "resource_policies": {}, "buckets": {}, "keys": {}, "log_groups": {}, "tables": {},
         "alarms": {}, "outputs": {}}
    role_of = {}
    for lid, r, p in res:
        typ = r["Type"]
        n = names[lid]
        if typ in COUNTED:
            m["resources"][n] = "%s DeletionPolicy %s, UpdateReplacePolicy %s" % (
                typ, r.get("DeletionPolicy", "Delete"), r.get("UpdateReplacePolicy", "Delete"))
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
                "FifoQueue": str(p.get("FifoQueue", False)).lower() == "true",
                "ContentBasedDeduplication": p.get("ContentBasedDeduplication"),
                "DeduplicationScope": p.get("DeduplicationScope"),
                "FifoThroughputLimit": p.get("FifoThroughputLimit"),
            }
        elif typ == "AWS::SNS::Subscription":
            m["subscriptions"][n] = canon({k: v for k, v in p.items()})
        elif typ == "AWS::Lambda::EventSourceMapping":
            m["event_sources"][n] = {
                "EventSource": canon(p.get("EventSourceArn")),
                "Function": canon(p.get("FunctionName")),
                "BatchSize": int(p.get("BatchSize", 10)),
                "MaximumBatchingWindowInSeconds": int(p.get("MaximumBatchingWindowInSeconds", 0)),
                "FunctionResponseTypes": p.get("FunctionResponseTypes", []),
                "ScalingConfig": canon({k: int(v) for k, v in (p.get("ScalingConfig") or {}).items()}) or None,
                # Provisioned mode: only the counts set, AWS's defaults for the others.
                "ProvisionedPollerConfig": {k: int(v) for k, v in (p.get("ProvisionedPollerConfig") or {}).items()} or None,
                "Enabled": p.get("Enabled", True),
                "FilterCriteria": p.get("FilterCriteria"),
            }
        elif typ == "AWS::Lambda::Function":
            env = (p.get("Environment") or {}).get("Variables") or {}
            m["functions"][n] = {
                "Description": p.get("Description"),
                "Runtime": p.get("Runtime"),
                "Architectures": p.get("Architectures"),
                "Handler": p.get("Handler"),
                "MemorySize": int(p.get("MemorySize", 128)),
                "Timeout": int(p.get("Timeout", 3)),
                "Environment": {k: canon(str(v)) for k, v in env.items()},
                "DeadLetterTarget": canon((p.get("DeadLetterConfig") or {}).get("TargetArn")),
                "LoggingConfig": canon(p.get("LoggingConfig") or {}),
                "Role": canon(p.get("Role")),
                # SAM writes TracingConfig {Mode: NoValue} when tracing is off: none.
                "TracingConfig": p.get("TracingConfig") or None,
                "Layers": [canon(l) for l in p.get("Layers") or []],
                "ReservedConcurrentExecutions": p.get("ReservedConcurrentExecutions"),
            }
            role_of[canon(p.get("Role"))] = n
        elif typ == "AWS::S3::Bucket":
            m["buckets"][n] = canon({k: v for k, v in p.items() if k != "BucketName"})
        elif typ == "AWS::Logs::LogGroup":
            m["log_groups"][n] = {"RetentionInDays": int(p["RetentionInDays"]) if "RetentionInDays" in p else None,
                                  "KmsKeyId": canon(p.get("KmsKeyId"))}
        elif typ == "AWS::DynamoDB::Table":
            m["tables"][n] = canon(p)
        elif typ == "AWS::CloudWatch::Alarm":
            m["alarms"][n] = {
                "metric": "%s/%s %s %ss" % (p.get("Namespace"), p.get("MetricName"), p.get("Statistic"), p.get("Period")),
                "dimensions": canon(p.get("Dimensions")),
                "when": "%s %s for %s" % (p.get("ComparisonOperator"), float(p["Threshold"]), p.get("EvaluationPeriods")),
                "TreatMissingData": p.get("TreatMissingData"),
                "AlarmActions": canon(p.get("AlarmActions", [])),
                "OKActions": canon(p.get("OKActions", [])),
            }
        if typ == "AWS::KMS::Key":
            m["keys"][n] = {k: p.get(k) for k in ("Description", "EnableKeyRotation", "KeySpec", "KeyUsage")}
        if typ in ("AWS::SNS::TopicPolicy", "AWS::SQS::QueuePolicy", "AWS::S3::BucketPolicy", "AWS::KMS::Key"):
            doc = p.get("PolicyDocument") or p.get("KeyPolicy")
            m["resource_policies"][n] = sorted(
                json.dumps({"Effect": s["Effect"], "Principal": canon(s.get("Principal")),
                            "Action": sorted(as_list(s["Action"])),
                            "Resource": sorted(canon(str(r)) for r in as_list(s["Resource"])),
                            "Condition": canon(s.get("Condition"))},
                           sort_keys=True) for s in statements(doc))
    # IAM: every (action, resource, condition) of each function's role,
    # from the role's inline policies, its managed policies and the
    # AWS::IAM::Policy resources attached to it; and of each managed policy
    # of the stack (the operator's), by its name.
    pairs = {}
    for lid, r, p in res:
        if r["Type"] == "AWS::IAM::Role":
            n = names[lid]
            fn = role_of.get("${%s.Arn}" % n, n)
            bucket = pairs.setdefault(fn, set())
            for mp in p.get("ManagedPolicyArns", []):
                bucket.add(("MANAGED POLICY", canon(mp), "null"))
            for pol in p.get("Policies", []):
                bucket.update(grants(statements(pol["PolicyDocument"])))
    for lid, r, p in res:
        if r["Type"] == "AWS::IAM::Policy":
            for role in p["Roles"]:
                rn = canon(role).strip("${}")
                fn = role_of.get("${%s.Arn}" % rn, rn)
                pairs.setdefault(fn, set()).update(grants(statements(p["PolicyDocument"])))
        if r["Type"] == "AWS::IAM::ManagedPolicy":
            pairs.setdefault(names[lid], set()).update(grants(statements(p["PolicyDocument"])))
    m["iam"] = {fn: sorted(" ".join(x) for x in v) for fn, v in pairs.items()}
    m["outputs"] = {k: canon(str(v)) for k, v in R.outputs()}
    count(m)
    return m


def count(m):
    m["counts"] = {}
    for desc in m["resources"].values():
        typ = desc.split()[0]
        m["counts"][typ] = m["counts"].get(typ, 0) + 1


# ---------------------------------------------------------------- intended differences

# Differences on purpose. Each is either normalized away in canon() or
# conditions(), outside the model, or removed from the CDK model by a
# function in INTENDED_FIXUPS; named here so that the output says so.
INTENDED = [
    "new bucket name: CDK inserts its construct address (s3sqs-<addr8>-<stack id>), SAM uses s3sqs-<stack id> (canon())",
    "alarm descriptions name the CDK construct path or the SAM stack name (not compared)",
    "existing bucket: CDK adds the notification (with keyPrefix/keySuffix) through its notifications custom resource "
    "(a Python function with AWSLambdaBasicExecutionRole); SAM creates no code of its own and leaves the notification "
    "to the user, as docs/deploy-sam.md shows (drop_notifications_handler)",
    "IAM statements: CDK writes one s3:ListBucket and s3:ListBucketVersions statement per dataset bucket listing its "
    "prefixes, SAM one per bucket slot; both grant the same (action, resource, condition) triples (conditions())",
    "limits SAM has and CDK has not: up to 3 dataset buckets with up to 4 prefixes each (CloudFormation cannot loop "
    "over a list; more prefixes are not granted: AccessDenied, never wider); timeouts of 30, 60, 120, 180, 300, 600 "
    "or 900 s and batching windows of 0-300 s in steps (the VisibilityFor table: no arithmetic in CloudFormation)",
]


def drop_notifications_handler(m):
    for section in m.values():
        for k in [k for k in section if k.startswith("BucketNotificationsHandler")]:
            del section[k]
    count(m)


INTENDED_FIXUPS = [drop_notifications_handler]

# CDK context keys with no SAM parameter, each with its reason.
CDK_ONLY = {
    "stackName": "SAM's stack name is sam deploy's --stack-name (samconfig.toml stack_name)",
    "nag": "cdk-nag runs in the CDK app only; SAM's check is cfn-lint",
    "s3ingestCodeDir": "SAM builds the code itself (BuildMethod: makefile, CodeUri)",
    "fanoutCodeDir": "SAM builds the code itself (BuildMethod: makefile, CodeUri)",
    "ingestEnv": "a parameter cannot name an environment variable; add variables to template.yaml",
    "fanoutEnv": "a parameter cannot name an environment variable; add variables to template.yaml",
}

# CDK context key -> the SAM parameters that say the same.
CONTEXT_PARAMETERS = {
    "ingest": ["Ingest"],
    "fanout": ["Fanout"],
    "encryption": ["Encryption"],
    "maxReceiveCount": ["MaxReceiveCount"],
    "logRetentionDays": ["LogRetentionDays"],
    "alarmTopicArn": ["AlarmTopicArn"],
    "claims": ["Claims"],
    "claimsTtl": ["ClaimsTtl"],
    "offload": ["Offload"],
    "offloadBucketName": ["OffloadBucketName"],
    "offloadPrefix": ["OffloadPrefix"],
    "offloadExpirationDays": ["OffloadExpirationDays"],
    "offloadAlways": ["OffloadAlways"],
    "bucketName": ["ExistingBucketName"],
    "bucketKeyArn": ["ExistingBucketKeyArn"],
    "keyPrefix": ["KeyPrefix"],
    "keySuffix": ["KeySuffix"],
    "ingestTimeout": ["IngestTimeout"],
    "ingestMemoryMiB": ["IngestMemorySize"],
    "ingestBatchSize": ["IngestBatchSize"],
    "ingestBatchingWindow": ["IngestBatchingWindow"],
    "ingestMaxConcurrency": ["IngestMaxConcurrency"],
    "ingestMinPollers": ["IngestMinPollers"],
    "ingestMaxPollers": ["IngestMaxPollers"],
    "ingestFormat": ["IngestFormat"],
    "csvDelimiter": ["CsvDelimiter"],
    "csvQuote": ["CsvQuote"],
    "csvEscape": ["CsvEscape"],
    "csvHeader": ["CsvHeader"],
    "csvNoQuotedNewlines": ["CsvNoQuotedNewlines"],
    "parquetBinaryAsString": ["ParquetBinaryAsString"],
    "ingestAgeAlarm": ["IngestAgeAlarmSeconds"],
    "fanoutTaskAgeAlarm": ["FanoutTaskAgeAlarmSeconds"],
    "dashboard": ["CreateDashboard"],
    "tracing": ["Tracing"],
    "tracingCollectorLayerArn": ["TracingCollectorLayerArn"],
    "outputFifo": ["OutputFifo"],
    "handoffBytes": ["HandoffBytes"],
    "fanoutTimeout": ["FanoutTimeout"],
    "fanoutMemoryMiB": ["FanoutMemorySize"],
    "fanoutBatchSize": ["FanoutBatchSize"],
    "fanoutBatchingWindow": ["FanoutBatchingWindow"],
    "fanoutMaxConcurrency": ["FanoutMaxConcurrency"],
    "fanoutMinPollers": ["FanoutMinPollers"],
    "fanoutMaxPollers": ["FanoutMaxPollers"],
    "targetQueueArn": ["TargetQueueArn"],
    "targetKeyArn": ["TargetKeyArn"],
    "targetMaxMessageSize": ["TargetMaxMessageSize"],
    "targetFifo": ["TargetFifo"],
    "datasets": ["DatasetBucket%d" % i for i in (1, 2, 3)] + ["DatasetPrefixes%d" % i for i in (1, 2, 3)],
    "datasetKeys": ["DatasetKeyArn%d" % i for i in (1, 2, 3)],
    "fanoutFormat": ["FanoutFormat"],
    "fanoutMode": ["FanoutMode"],
    "notificationFormat": ["FanoutNotificationFormat"],
    "chunkSize": ["ChunkSize"],
    "maxInFlight": ["MaxInFlight"],
    "failOnError": ["FailOnError"],
    "maxRate": ["MaxRate"],
    "targetMaxBacklog": ["TargetMaxBacklog"],
    "maxFailures": ["MaxFailures"],
    "maxFailedObjects": ["MaxFailedObjects"],
    "modifiedAfter": ["ModifiedAfter"],
    "modifiedBefore": ["ModifiedBefore"],
    "minObjectSize": ["MinObjectSize"],
    "maxObjectSize": ["MaxObjectSize"],
    "storageClasses": ["StorageClasses"],
    "keyRegex": ["KeyRegex"],
    "reconcileEveryMinutes": ["ReconcileEveryMinutes"],
    "report": ["Report"],
    "reportBucketName": ["ReportBucketName"],
    "reportPrefix": ["ReportPrefix"],
    "reportExpirationDays": ["ReportExpirationDays"],
    "batchOperations": ["BatchOperations"],
    "batchManifestBucketName": ["BatchManifestBucketName"],
    "batchManifestPrefix": ["BatchManifestPrefix"],
    "batchReportBucketName": ["BatchReportBucketName"],
    "batchReportPrefix": ["BatchReportPrefix"],
}


# ---------------------------------------------------------------- sets

def load_sets(path):
    with open(path) as f:
        sets = json.load(f)["sets"]
    names = [s["name"] for s in sets]
    if names[0] != "defaults" or len(set(names)) != len(names) or sets[0]["context"] or sets[0]["parameters"]:
        raise ValueError("%s: the first set must be \"defaults\", empty, and names unique" % path)
    for s in sets:
        for k, v in list(s["context"].items()) + list(s["parameters"].items()):
            if not isinstance(v, str) or re.search(r"\s", v) or v == "":
                raise ValueError("%s: set %s: %s=%r: values are non-empty strings without spaces" % (path, s["name"], k, v))
    return sets


def context_words(s):
    return ["-c %s=%s" % (k, v) for k, v in s["context"].items()]


def context_keys():
    with open(os.path.join(ROOT, "infra", "context.go")) as f:
        return set(re.findall(r'^\s*ctx\w+\s*=\s*"(\w+)"', f.read(), re.M))


def doc_keys(path):
    """The backticked names in the first column of a Markdown table whose
    header's first cell is 'context key' or 'Parameter'."""
    keys, in_table = set(), False
    with open(path) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
            if not cells:
                in_table = False
                continue
            if cells[0].lower() in ("context key", "parameter"):
                in_table = True
                continue
            if in_table and not set(cells[0]) <= set("-: "):
                keys.update(re.findall(r"`([A-Za-z0-9]+)`", cells[0]))
    return keys


def coverage(sam_tpl, sets):
    """What the sets and the mapping leave out, as messages."""
    out = []
    params = sam_tpl.get("Parameters", {})
    ctx = context_keys()
    mapped = set(CONTEXT_PARAMETERS) | set(CDK_ONLY)
    for k in sorted(ctx - mapped):
        out.append("context key %s (infra/context.go) has no SAM parameter in CONTEXT_PARAMETERS and is not in CDK_ONLY" % k)
    for k in sorted(mapped - ctx):
        out.append("CONTEXT_PARAMETERS/CDK_ONLY name %s, which infra/context.go does not read" % k)
    to_ctx = {p: k for k, ps in CONTEXT_PARAMETERS.items() for p in ps}
    for p in sorted(set(params) - set(to_ctx)):
        out.append("parameter %s maps to no CDK context key in CONTEXT_PARAMETERS" % p)
    for p in sorted(set(to_ctx) - set(params)):
        out.append("CONTEXT_PARAMETERS names %s, which template.yaml does not have" % p)
    varied = set()
    for s in sets:
        for k in s["context"]:
            if k not in CONTEXT_PARAMETERS:
                out.append("set %s: context %s has no SAM parameter" % (s["name"], k))
            elif not any(p in s["parameters"] for p in CONTEXT_PARAMETERS[k]):
                out.append("set %s: context %s is set, none of its parameters %s" % (s["name"], k, CONTEXT_PARAMETERS[k]))
        for p, v in s["parameters"].items():
            if p in to_ctx and to_ctx[p] not in s["context"]:
                out.append("set %s: parameter %s is set, its context key %s is not" % (s["name"], p, to_ctx[p]))
            if p in params and str(v) != str(params[p].get("Default")):
                varied.add(p)
    for p in sorted(set(params) - varied):
        out.append("parameter %s keeps its default in every set: give it another value in one" % p)
    for path, want, what in [(os.path.join(ROOT, "docs", "deploy-cdk.md"), ctx, "context keys"),
                             (os.path.join(ROOT, "docs", "deploy-sam.md"), set(params), "parameters")]:
        got = doc_keys(path)
        rel = os.path.relpath(path, ROOT)
        for k in sorted(want - got):
            out.append("%s: the table of %s lacks %s" % (rel, what, k))
        for k in sorted(got - want):
            out.append("%s: the table of %s lists %s, which does not exist" % (rel, what, k))
    return out


# ---------------------------------------------------------------- compare

class Comparer:
    """Compares template.yaml with the CDK template of each set; the SAM
    transform runs once per template, the CDK models once per set."""

    def __init__(self, sets, cdk_tpls):
        self.sets = sets
        self.cdk = {}
        for s in sets:
            m = model(cdk_tpls[s["name"]], cdk=True)
            for f in INTENDED_FIXUPS:
                f(m)
            self.cdk[s["name"]] = m

    def diffs(self, sam_tpl):
        """{set name: diff lines} of the sets that differ."""
        out = {}
        transformed = sam_transform(sam_tpl)
        for s in self.sets:
            sam = model(transformed, cdk=False, values=s["parameters"])
            a = json.dumps(self.cdk[s["name"]], indent=1, sort_keys=True).splitlines()
            b = json.dumps(sam, indent=1, sort_keys=True).splitlines()
            d = list(difflib.unified_diff(a, b, "CDK (set %s)" % s["name"], "SAM (set %s)" % s["name"], lineterm="", n=4))
            if d:
                out[s["name"]] = d
        return out


# The Rules that stand for a refusal of the CDK app, which synthesizes no
# template for it, so no parameter set shows them: name -> (RuleCondition,
# Assert).
GUARDS = {
    # infra/context.go: "fanout is enabled but can read no dataset".
    "FanoutNeedsDataset": ({"Fn::Equals": [{"Ref": "Fanout"}, "true"]},
                           {"Fn::Not": [{"Fn::Equals": [{"Ref": "DatasetBucket1"}, ""]}]}),
    # infra/s3sqscdk/props.go: a reconcile schedule needs the ingest path
    # and the claims table (and fanout, which runs it).
    "ReconcileNeedsIngestFanoutClaims": ({"Fn::Not": [{"Fn::Equals": [{"Ref": "ReconcileEveryMinutes"}, "0"]}]},
                                         {"Fn::And": [{"Fn::Equals": [{"Ref": "Ingest"}, "true"]}, {"Fn::Equals": [{"Ref": "Fanout"}, "true"]},
                                                      {"Fn::Equals": [{"Ref": "Claims"}, "true"]}]}),
    # infra/s3sqscdk/props.go: a notification format needs notification
    # mode, and a claims TTL the claims table.
    "NotificationFormatNeedsNotificationMode": ({"Fn::Not": [{"Fn::Equals": [{"Ref": "FanoutNotificationFormat"}, ""]}]},
                                                {"Fn::Equals": [{"Ref": "FanoutMode"}, "notification"]}),
    "ClaimsTtlNeedsClaims": ({"Fn::Not": [{"Fn::Equals": [{"Ref": "ClaimsTtl"}, ""]}]},
                             {"Fn::Equals": [{"Ref": "Claims"}, "true"]}),
}
# infra/s3sqscdk/props.go (checkEventSource): provisioned mode is not
# allowed with MaxConcurrency, and a poller count is 0 (unset) or at least
# 2. (That MinPollers <= MaxPollers, which the construct also checks, has
# no Rule: CloudFormation's rules cannot compare numbers; Lambda refuses.)
for _w in ("Ingest", "Fanout"):
    GUARDS[_w + "PollersOrMaxConcurrency"] = (
        {"Fn::Not": [{"Fn::Equals": [{"Ref": _w + "MaxConcurrency"}, "0"]}]},
        {"Fn::And": [{"Fn::Equals": [{"Ref": _w + "MinPollers"}, "0"]}, {"Fn::Equals": [{"Ref": _w + "MaxPollers"}, "0"]}]})
    GUARDS[_w + "PollersAtLeastTwo"] = (
        None,
        {"Fn::And": [{"Fn::Not": [{"Fn::Equals": [{"Ref": _w + "MinPollers"}, "1"]}]},
                     {"Fn::Not": [{"Fn::Equals": [{"Ref": _w + "MaxPollers"}, "1"]}]}]})


def guard_gaps(sam_tpl):
    """guard_gaps names each rule of GUARDS that template.yaml lacks or has changed."""
    rules = sam_tpl.get("Rules", {})
    gaps = []
    for name, (cond, assertion) in GUARDS.items():
        r = rules.get(name)
        if r is None:
            gaps.append("Rules.%s is missing: the CDK app refuses that deployment, template.yaml must too" % name)
        elif r.get("RuleCondition") != cond or assertion not in [a.get("Assert") for a in r.get("Assertions", [])]:
            gaps.append("Rules.%s does not assert %s when %s" % (name, json.dumps(assertion), json.dumps(cond)))
    return gaps


# ---------------------------------------------------------------- selftest

def _res(t, n):
    return t["Resources"][n]["Properties"]


def _fanout_statements(t):
    return _res(t, "FanoutRole")["Policies"][0]["PolicyDocument"]["Statement"]


def _if_statement(sts, condition):
    """The statement inside `!If [condition, {...}, NoValue]` in sts."""
    return next(s["Fn::If"][1] for s in sts if isinstance(s, dict) and s.get("Fn::If", [None])[0] == condition)


# Planted drifts: (what, where it must show: "any" or the non-default sets
# only, plant). Each must make some set differ; a "non-default" drift must
# leave the defaults equal, so that only the other sets can catch it.
def _drifts():
    def target_statement(t):
        # The target statement: exactly GetQueueUrl, SendMessage and
        # GetQueueAttributes.
        return next(s for s in _fanout_statements(t)
                    if isinstance(s, dict) and "sqs:GetQueueUrl" in s.get("Action", []) and "sqs:SendMessage" in s["Action"])

    def fanout_wider(t):
        target_statement(t)["Action"].append("sqs:DeleteMessage")

    def no_backlog_read(t):
        target_statement(t)["Action"].remove("sqs:GetQueueAttributes")

    def topic_condition(t):
        del _res(t, "TopicPolicy")["PolicyDocument"]["Statement"][1]["Condition"]["StringEquals"]

    def env(fn, t):
        return _res(t, fn)["Environment"]["Variables"]

    yield "IngestBatchSize default 10 -> 5", "any", lambda t: t["Parameters"]["IngestBatchSize"].update(Default=5)
    yield "no ReportBatchItemFailures on fanout", "any", lambda t: _res(t, "FanoutFunction")["Events"]["WorkQueue"]["Properties"].pop("FunctionResponseTypes")
    yield "MaxReceiveCount default 5 -> 3", "any", lambda t: t["Parameters"]["MaxReceiveCount"].update(Default=3)
    yield "ingest visibility not 6x timeout", "any", lambda t: t["Mappings"]["VisibilityFor"]["120"].update({"0": 120})
    yield "fanout gets sqs:DeleteMessage on the target", "any", fanout_wider
    yield "fanout loses sqs:GetQueueAttributes on the target (backpressure)", "any", no_backlog_read
    yield "no ClaimsTableName output", "any", lambda t: t["Outputs"].pop("ClaimsTableName")
    yield "topic policy loses aws:SourceAccount", "any", topic_condition
    yield "s3ingest on x86_64", "any", lambda t: _res(t, "S3IngestFunction").update(Architectures=["x86_64"])
    yield "s3ingest runtime provided.al2", "any", lambda t: _res(t, "S3IngestFunction").update(Runtime="provided.al2")
    yield "fanout env WORK_QUEUE_URL renamed", "any", lambda t: env("FanoutFunction", t).update(
        WORK_QUEUE=env("FanoutFunction", t).pop("WORK_QUEUE_URL"))
    yield "fanout's TARGET_MAX_BACKLOG written when unset", "any", lambda t: env("FanoutFunction", t).update(
        TARGET_MAX_BACKLOG={"Ref": "TargetMaxBacklog"})
    yield "SAM-generated role (managed policies)", "any", lambda t: (_res(t, "S3IngestFunction").pop("Role"),
                                                                    _res(t, "S3IngestFunction").update(Policies=[{"SQSPollerPolicy": {"QueueName": {"Fn::GetAtt": ["IngestQueue", "QueueName"]}}}]))
    yield "the operator may receive from the output queue", "any", lambda t: _res(t, "OperatorPolicy")["PolicyDocument"]["Statement"].append(
        {"Effect": "Allow", "Action": "sqs:ReceiveMessage", "Resource": {"Fn::GetAtt": ["OutputQueue", "Arn"]}})
    yield "no OperatorPolicyArn output", "any", lambda t: t["Outputs"].pop("OperatorPolicyArn")
    yield "an extra queue", "any", lambda t: t["Resources"].update(Extra={"Type": "AWS::SQS::Queue", "Properties": {}})
    yield "work queue age alarm at 900 s", "any", lambda t: t["Parameters"]["FanoutTaskAgeAlarmSeconds"].update(Default=900)
    yield "no throttles alarm on fanout", "any", lambda t: t["Resources"].pop("FanoutThrottlesAlarm")
    yield "claims table without TTL", "any", lambda t: _res(t, "ClaimsTable").pop("TimeToLiveSpecification")
    yield "fanout log retention fixed at 30 days", "non-default", lambda t: _res(t, "FanoutLogs").update(RetentionInDays=30)

    # Only a non-default set can catch these.
    def dataset_list_unconditioned(t):
        _if_statement(_fanout_statements(t), "HasDataset1").pop("Condition")

    def queue_key_any_topic(t):
        del _res(t, "QueueKey")["KeyPolicy"]["Statement"][1]["Fn::If"][1]["Condition"]

    def report_uri_no_prefix(t):
        env("FanoutFunction", t)["REPORT_S3_URI"]["Fn::If"][1]["Fn::Join"][1].pop()

    def ingest_window_not_in_visibility(t):
        t["Mappings"]["VisibilityFor"]["300"]["20"] = 1800

    def bucket_key_dropped(t):
        sts = _res(t, "S3IngestRole")["Policies"][0]["PolicyDocument"]["Statement"]
        sts.remove(next(s for s in sts if isinstance(s, dict) and s.get("Fn::If", [None])[0] == "HasBucketKey"))

    def batch_invoke_any(t):
        _res(t, "BatchOperationsRole")["Policies"][0]["PolicyDocument"]["Statement"][0]["Resource"] = "*"

    def batch_report_in_manifest_prefix(t):
        st = _res(t, "BatchOperationsRole")["Policies"][0]["PolicyDocument"]["Statement"][2]
        st["Resource"]["Fn::Join"][1][-2] = {"Ref": "BatchManifestPrefix"}

    yield "the Batch Operations role may invoke any function", "non-default", batch_invoke_any
    yield "Batch Operations reports written under the manifest prefix", "non-default", batch_report_in_manifest_prefix
    yield "a dataset's s3:ListBucket loses its s3:prefix condition", "non-default", dataset_list_unconditioned
    yield "output DLQ not FIFO with OutputFifo", "non-default", lambda t: _res(t, "OutputDLQ").pop("FifoQueue")
    yield "queue key lets SNS use it for any topic", "non-default", queue_key_any_topic
    yield "REPORT_S3_URI without the prefix", "non-default", report_uri_no_prefix
    yield "ingest visibility ignores the batching window", "non-default", ingest_window_not_in_visibility
    yield "s3ingest loses kms:Decrypt on an existing bucket's key", "non-default", bucket_key_dropped
    yield "fanout's MAX_IN_FLIGHT dropped", "non-default", lambda t: env("FanoutFunction", t).pop("MAX_IN_FLIGHT")
    yield "fanout's MAX_RATE dropped", "non-default", lambda t: env("FanoutFunction", t).pop("MAX_RATE")
    yield "fanout's NOTIFICATION_FORMAT dropped", "non-default", lambda t: env("FanoutFunction", t).pop("NOTIFICATION_FORMAT")
    yield "s3ingest's CLAIMS_TTL dropped", "non-default", lambda t: env("S3IngestFunction", t).pop("CLAIMS_TTL")

    def dataset_no_list_versions(t):
        _if_statement(_fanout_statements(t), "HasDataset1")["Action"].remove("s3:ListBucketVersions")

    yield "a dataset loses s3:ListBucketVersions (replaying every version)", "non-default", dataset_no_list_versions

    def esm(fn, event, t):
        return _res(t, fn)["Events"][event]["Properties"]

    def ingest_min_pollers_always(t):
        # Written as 0 when unset, instead of left to AWS's default.
        esm("S3IngestFunction", "IngestQueue", t)["ProvisionedPollerConfig"]["Fn::If"][1]["MinimumPollers"] = {"Ref": "IngestMinPollers"}

    yield "fanout's ProvisionedPollerConfig dropped", "non-default", lambda t: esm("FanoutFunction", "WorkQueue", t).pop("ProvisionedPollerConfig")
    yield "s3ingest's MinimumPollers written when unset", "non-default", ingest_min_pollers_always
    yield "the ingest DLQ's alarm stays with Ingest=false", "non-default", lambda t: t["Resources"]["IngestDLQAlarm"].pop("Condition")


def selftest(comparer, sam_tpl):
    missed = []
    for what, where, plant in _drifts():
        t = copy.deepcopy(sam_tpl)
        try:
            plant(t)
        except (KeyError, IndexError, StopIteration, TypeError) as e:
            missed.append("%s (the drift no longer fits template.yaml: %r; update _drifts)" % (what, e))
            continue
        caught = comparer.diffs(t)
        if not caught:
            missed.append(what)
            continue
        if where == "non-default" and "defaults" in caught:
            missed.append(what + " (meant to show only at a non-default set, but the defaults catch it: plant it deeper)")
            continue
        print("selftest: caught at %s: %s" % (", ".join(sorted(caught)), what))
    for name in GUARDS:
        t = copy.deepcopy(sam_tpl)
        t.get("Rules", {}).pop(name, None)
        if guard_gaps(t):
            print("selftest: caught by guard_gaps: Rules.%s removed" % name)
        else:
            missed.append("Rules.%s removed" % name)
    if missed:
        print("selftest: NOT caught: " + "; ".join(missed))
        return 1
    return 0


# ---------------------------------------------------------------- main

def main(argv):
    args = argv[1:]
    if args[:1] == ["--list-sets"] and len(args) == 2:
        print("\n".join(s["name"] for s in load_sets(args[1])[1:]))
        return 0
    if args[:1] == ["--context"] and len(args) == 3:
        s = next((s for s in load_sets(args[1]) if s["name"] == args[2]), None)
        if s is None:
            print("no set %s in %s" % (args[2], args[1]), file=sys.stderr)
            return 2
        print(" ".join(context_words(s)))
        return 0
    opts = {"--selftest": False}
    rest = []
    while args:
        a = args.pop(0)
        if a == "--selftest":
            opts[a] = True
        elif a in ("--sets", "--cdk", "--cdk-sets") and args:
            opts[a] = args.pop(0)
        else:
            rest.append(a)
    if len(rest) != 1 or not all(k in opts for k in ("--sets", "--cdk", "--cdk-sets")):
        print(__doc__, file=sys.stderr)
        return 2
    sam_tpl = load_sam(rest[0])
    sets = load_sets(opts["--sets"])
    cdk_tpls = {}
    for s in sets:
        path = os.path.join(opts["--cdk"], STACK) if s["name"] == "defaults" else os.path.join(opts["--cdk-sets"], s["name"], STACK)
        if not os.path.exists(path):
            print("no %s for set %s: run make test-infra" % (path, s["name"]), file=sys.stderr)
            return 2
        with open(path) as f:
            cdk_tpls[s["name"]] = json.load(f)

    comparer = Comparer(sets, cdk_tpls)
    diffs = comparer.diffs(sam_tpl)
    for name, d in diffs.items():
        print("template.yaml and the CDK stack differ at set %s (- CDK, + SAM):" % name)
        print("\n".join(d))
    if diffs:
        print("\nFix template.yaml or infra/, or name the difference in INTENDED in %s.\n" % __file__)
    gaps = coverage(sam_tpl, sets) + guard_gaps(sam_tpl)
    if gaps:
        print("template.yaml, infra/context.go, the docs and %s do not cover each other:" % opts["--sets"])
        print("\n".join("  - " + g for g in gaps))
    if diffs or gaps:
        return 1
    if opts["--selftest"]:
        return selftest(comparer, sam_tpl)
    print("parity: template.yaml matches the CDK stack at %d parameter sets (%s); intended differences:"
          % (len(sets), ", ".join(s["name"] for s in sets)))
    for d in INTENDED:
        print("  - " + d)
    print("  CDK context keys without a SAM parameter:")
    for k, why in CDK_ONLY.items():
        print("  - %s: %s" % (k, why))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
