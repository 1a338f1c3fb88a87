"""A Python client as the deploy/ launchers start one (deploy_test.sh names
it in FEDCAF_CLIENT_CMD, or on a hosts-file `command` line).

    launched_client.py OUT_DIR [-c CONFIG] [--set KEY=VALUE]...

It trains every round (sends back the received model plus 0.5) and writes
OUT_DIR/<FEDCAF_CLIENT_ID>.json: the FEDCAF_* variables it was given, its
--set arguments, how it made its fedcaf.Client and its run report. Given
-c, the client of partition 0 makes its fedcaf.Client from the arguments,
as examples/python/fashion_mnist.py does; every other one from the
environment alone, fedcaf.Client() (FEDCAF_SERVER_URI, FEDCAF_CLIENT_ID):
one run covers both ways a launched command may take what it is given.
"""
import argparse
import json
import os

import numpy as np

import fedcaf

p = argparse.ArgumentParser()
p.add_argument("out_dir")
p.add_argument("-c", "--config")
p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
args = p.parse_args()
given = {k: v for k, v in os.environ.items() if k.startswith("FEDCAF_")}
sets = dict(kv.split("=", 1) for kv in args.set)
if args.config and given.get("FEDCAF_PARTITION") == "0":
    made_from = "arguments"
    client = fedcaf.Client(args.config, set=sets)
else:
    made_from = "environment"
    client = fedcaf.Client()
trained = 0
with client:
    for task in client.tasks():
        if task.evaluate_only:
            task.evaluate({"accuracy": 0.5}, num_samples=1)
            continue
        update = {n: np.array(task.arrays[n]) + 0.5 for n, _, _ in task.layout}
        task.send(update, num_samples=1)
        trained += 1
    report = client.report()
name = given.get("FEDCAF_CLIENT_ID", "unnamed")
with open(os.path.join(args.out_dir, f"{name}.json"), "w") as f:
    json.dump({"environment": given, "sets": sets, "config": args.config,
               "made_from": made_from, "rounds_trained": trained,
               "report": report}, f, indent=1)
print(f"launched client {name}: partition {given.get('FEDCAF_PARTITION')} "
      f"of {given.get('FEDCAF_NUM_PARTITIONS')}, server "
      f"{given.get('FEDCAF_SERVER_URI')}, made from the {made_from}, "
      f"{trained} rounds trained", flush=True)
