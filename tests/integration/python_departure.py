"""A Python client that leaves the run, as a user's loop does.

    python_departure.py MODE URI CLIENT_ID

MODE: "stay" trains every round (sends the model back, plus 0.5); "raise"
raises ValueError in its loop at round 3, uncaught; "wrong" sends an update
of the wrong shape at round 3, uncaught; "wait" stays, and is sent SIGTERM
by the test. No YAML file: fedcaf.Client(server_uri=..., client_id=...).
"""
import sys
import time

import numpy as np

import fedcaf

mode, uri, client_id = sys.argv[1:4]
client = fedcaf.Client(server_uri=uri, client_id=client_id)
for task in client.tasks():
    if task.evaluate_only:
        task.evaluate({"accuracy": 0.5}, num_samples=1)
        continue
    update = {n: np.array(task.arrays[n]) + 0.5 for n, _, _ in task.layout}
    if task.round == 3 and mode == "raise":
        print(f"raising at {time.time():.3f}", flush=True)
        raise ValueError("loss is nan at step 17")
    if task.round == 3 and mode == "wrong":
        name, _, shape = task.layout[0]
        update[name] = np.zeros((3,) + tuple(shape), dtype=np.float32)
        print(f"sending the wrong shape at {time.time():.3f}", flush=True)
    if mode == "wait":
        time.sleep(0.2)
    task.send(update, num_samples=1)
print("the run ended", flush=True)
