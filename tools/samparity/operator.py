#!/usr/bin/env python3
"""operator.py TEMPLATE < request.json

Evaluates AWS calls against the OperatorPolicy of a SAM template (the
managed policy an operator's role attaches to run the s3sqs CLI), as IAM
evaluates an identity policy: a call is allowed when an Allow statement
matches its action (case-insensitive, with wildcards), its resource (with
wildcards) and all of the statement's conditions, and no Deny statement
matches it.

The request is a JSON object:
  parameters  the template's parameter values (the rest take their default)
  bind        what each ${...} placeholder of the resolved policy stands for:
              "WorkQueue.Arn", "ClaimsTable.Arn", "SourceBucket", ... (the
              partition, region and account have defaults: aws, us-east-1,
              123456789012)
  calls       [{"action", "resource", "context": {"s3:prefix": ...}, "operation"}]

It prints {"denied": [calls not allowed], "unused": [each action of a
statement that no call used, "ACTION on RESOURCES"]} and exits 0; 1 when the template has no OperatorPolicy at these
parameters or a placeholder is left unbound; 2 on usage errors.
TestOperatorPolicy (cmd/s3sqs) runs it over the calls the documented
operator commands make.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity import Resolver, as_list, load_sam  # noqa: E402

DEFAULT_BIND = {"AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012"}


def glob(pattern, value, fold=False):
    """IAM's wildcard match: * any run of characters, ? one character."""
    rx = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(rx, value, re.IGNORECASE if fold else 0) is not None


def bind(x, values):
    if isinstance(x, list):
        return [bind(v, values) for v in x]
    if isinstance(x, dict):
        return {k: bind(v, values) for k, v in x.items()}
    if not isinstance(x, str):
        return x

    def rep(m):
        if m.group(1) not in values:
            raise KeyError(m.group(1))
        return values[m.group(1)]
    return re.sub(r"\$\{([^}]+)\}", rep, x)


# Condition operators this project's policies use; any other is an error
# rather than a guess.
OPERATORS = {
    "StringEquals": lambda want, got: got == want,
    "StringLike": lambda want, got: glob(want, got),
}


def conditions_hold(cond, context):
    for op, keys in (cond or {}).items():
        if op not in OPERATORS:
            raise ValueError("condition operator %s is not supported" % op)
        for key, wants in keys.items():
            got = context.get(key)
            if got is None or not any(OPERATORS[op](w, got) for w in as_list(wants)):
                return False
    return True


def matches(st, call):
    return (any(glob(a, call["action"], fold=True) for a in as_list(st["Action"]))
            and any(glob(r, call["resource"]) for r in as_list(st["Resource"]))
            and conditions_hold(st.get("Condition"), call.get("context") or {}))


def evaluate(statements, calls):
    """The calls no statement allows (or one denies), and each action of an
    Allow statement that no allowed call used, as "ACTION on RESOURCES"."""
    denied, used = [], set()
    for call in calls:
        allow = [i for i, st in enumerate(statements) if st["Effect"] == "Allow" and matches(st, call)]
        deny = [st for st in statements if st["Effect"] == "Deny" and matches(st, call)]
        if not allow or deny:
            denied.append(call)
            continue
        for i in allow:
            used.update((i, a) for a in as_list(statements[i]["Action"]) if glob(a, call["action"], fold=True))
    unused = ["%s on %s" % (a, ", ".join(sorted(as_list(st["Resource"]))))
              for i, st in enumerate(statements) if st["Effect"] == "Allow"
              for a in as_list(st["Action"]) if (i, a) not in used]
    return denied, unused


def operator_statements(template, parameters, values):
    tpl = load_sam(template)
    names = {lid: lid for lid in tpl["Resources"]}
    r = Resolver(tpl, names, parameters)
    res = tpl["Resources"].get("OperatorPolicy")
    if res is None or ("Condition" in res and not r.condition(res["Condition"])):
        raise LookupError("the template has no OperatorPolicy at these parameters")
    doc = r.v(res["Properties"]["PolicyDocument"])
    return bind(as_list(doc["Statement"]), {**DEFAULT_BIND, **values})


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    req = json.load(sys.stdin)
    try:
        sts = operator_statements(argv[1], req.get("parameters") or {}, req.get("bind") or {})
    except LookupError as e:
        print("operator.py: %s" % e, file=sys.stderr)
        return 1
    except KeyError as e:
        print("operator.py: the policy names ${%s}, which the request does not bind" % e.args[0], file=sys.stderr)
        return 1
    denied, unused = evaluate(sts, req.get("calls") or [])
    json.dump({"denied": denied, "unused": unused}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
