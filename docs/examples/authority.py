#!/usr/bin/env python3
"""An example HAI-Relay authority adapter (docs/authority.md), in Python.

Policy: read_only tasks are allowed; state_changing tasks are allowed only
for claude, with the guarded assurance; anything else is denied. Every
decision is appended to the file named by AUTHORITY_LOG, when set (pass the
variable through with [authority] env = ["AUTHORITY_LOG"]).
"""
import json
import os
import sys

req = json.loads(sys.stdin.readline())
if req.get("version") != 1:
    sys.exit("unknown request version: %r" % req.get("version"))  # exit 1

if req["mode"] == "read_only":
    answer = {"decision": "allow", "assurance": "standard"}
elif req["target"] == "claude":
    answer = {"decision": "allow", "assurance": "guarded"}
else:
    answer = {"decision": "deny", "code": "example.state_changing",
              "message": "only claude may change state"}

log = os.environ.get("AUTHORITY_LOG")
if log:
    with open(log, "a") as f:
        f.write(json.dumps({"task_id": req["task_id"], "answer": answer}) + "\n")
json.dump(answer, sys.stdout)
