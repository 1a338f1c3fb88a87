"""fedcaf's Python client: your model, your data, your training loop.

The C++ client (the same actor, gateway, TLS and resume as `fedcaf client`)
runs inside this process; arrays cross without copies. A round's global model
is delivered as numpy arrays that view the memory it was received into, and an
update is streamed chunk by chunk straight from your arrays or CPU tensors.

    import fedcaf
    client = fedcaf.Client("configs/client_1.yaml")
    for task in client.tasks():            # blocks until the server starts a round
        if task.evaluate_only:             # the run's final model
            task.evaluate({"accuracy": acc, "loss": loss}, num_samples=n)
            continue
        model.load_state_dict(task.model_state(torch))
        task.evaluate({"accuracy": acc}, num_samples=m)  # optional: of
        n, metrics = train(model)                        # this task's model
        task.send(model.state_dict(), num_samples=n, metrics=metrics)

No LibTorch is linked: torch (CUDA or not), JAX or NumPy code all work.
Each rank of a multi-process job (torchrun, FSDP, ZeRO) can be one rank of a
sharded client that moves only its slices: fedcaf.Client(path,
shard="torchrun") (see Client).
"""

import atexit
import json
import os
import signal
import struct
import sys
import threading
import weakref

import numpy as np

from . import _fedcaf

__all__ = ["Client", "Task", "Error", "save_safetensors"]

Error = _fedcaf.Error
Error.__doc__ = (
    "A fedcaf failure: .code is fedcaf's error code (e.g. 'manifest_mismatch'),"
    " .message says what happened.")
Error.code = property(lambda self: self.args[0] if self.args else "internal")
Error.message = property(lambda self: self.args[1] if len(self.args) > 1 else "")
Error.__str__ = lambda self: f"{self.code}: {self.message}"

# dtype names as fedcaf (and the manifest) spell them.
_DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32",
           "uint8", "int16", "int8", "bool")
_SAFETENSORS = {"float32": "F32", "float16": "F16", "bfloat16": "BF16",
                "float64": "F64", "int64": "I64", "int32": "I32", "uint8": "U8",
                "int16": "I16", "int8": "I8", "bool": "BOOL"}


def _torch_dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def _as_array(name, value):
    """Returns (array, dtype name) viewing `value` without a copy where it can
    (numpy arrays, contiguous CPU tensors); other devices are copied to the
    CPU one tensor at a time."""
    if isinstance(value, np.ndarray):
        return value, str(value.dtype)
    if hasattr(value, "detach") and hasattr(value, "dtype"):  # a torch tensor
        t = value.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        t = t.contiguous()
        kind = _torch_dtype_name(t)
        if kind == "bfloat16":  # numpy has none: its bits as int16
            torch = sys.modules[type(value).__module__.split(".")[0]]
            t = t.view(torch.int16)
        return t.numpy(), kind
    a = np.asarray(value)  # JAX arrays and anything array-like
    return a, str(a.dtype)


class Task:
    """One round: the global model received, and what you send back."""

    def __init__(self, task, client=None):
        self._task = task
        self._client = client
        self._arrays = None

    @property
    def round(self):
        """The round's number (1 for the first)."""
        return self._task.round

    @property
    def evaluate_only(self):
        """True for the run's final model: evaluate it, do not train."""
        return self._task.evaluate_only

    @property
    def cancelled(self):
        """True once the run is over for this client: the server ended it
        (Ctrl-C, its last round, a failure) or the client was closed. Read it
        between steps of a long local epoch and stop: an update need not be
        sent then, and the next `client.tasks()` step ends the loop."""
        return self._task.cancelled

    @property
    def proximal_mu(self):
        """The server's train_configs.proximal_mu (FedProx's mu; 0: off)."""
        return self._task.proximal_mu

    @property
    def layout(self):
        """[(name, dtype, shape)] of the model, in the server's order."""
        return self._task.layout()

    @property
    def arrays(self):
        """dict name -> numpy array viewing the received model (no copy).
        bfloat16 tensors are uint16 arrays of their bits. The memory is the
        client's: the next round's model is received into it. Integer and
        bool tensors (which travel in the model's floating dtype) are arrays
        of their own dtype, rounded back: copies."""
        if self._arrays is None:
            self._arrays = self._task.arrays()
        return self._arrays

    def model_state(self, torch):
        """The received model as a state dict of CPU tensors sharing its
        memory (bfloat16 through torch.frombuffer, without a copy)."""
        out = {}
        for name, dtype, shape in self.layout:
            a = self.arrays[name]
            if dtype == "bfloat16":
                t = torch.frombuffer(a, dtype=torch.bfloat16)
                out[name] = t.reshape(shape) if len(shape) else t.reshape(())
            else:
                out[name] = torch.from_numpy(a)
        return out

    def send(self, state, num_samples, metrics=None):
        """Streams the update: `state` maps every tensor name of the model to
        an array or tensor of the same shape and dtype. Returns once the
        server has all of it. Raises fedcaf.Error (manifest_mismatch names
        the tensor and both shapes or dtypes)."""
        items = state.items() if hasattr(state, "items") else state
        tensors = [(name,) + _as_array(name, value) for name, value in items]
        try:
            self._task.send(tensors, _count(num_samples), _figures(metrics))
        except (KeyboardInterrupt, SystemExit) as e:  # while it uploads
            if self._client is not None:
                self._client._leave_on(e)
            raise

    def evaluate(self, metrics, num_samples):
        """Reports your evaluation of this task's model on your own data
        ("accuracy" and "loss" are what the server reports as the round's
        test_accuracy and test_loss when it cannot evaluate the model)."""
        self._task.evaluate(_count(num_samples), _figures(metrics))


class FedProx:
    """FedProx (Li et al. 2020) for your training loop: build it once the
    received model is loaded into `model`, then add `term()` to each
    batch's loss; it is mu / 2 ||w - w_received||^2 over the model's
    parameters, mu from the server's train_configs.proximal_mu unless given.

        prox = fedcaf.FedProx(model, task)
        loss = loss_fn(model(x), y) + prox.term()
    """

    def __init__(self, model, task, mu=None):
        self.mu = float(task.proximal_mu if mu is None else mu)
        self._params = [p for p in model.parameters() if p.requires_grad]
        self._anchor = [p.detach().clone() for p in self._params]

    def term(self):
        """The proximal term: a tensor to add to the loss (0.0 if mu is 0)."""
        if self.mu == 0:
            return 0.0
        total = sum(((p - a) ** 2).sum() for p, a in zip(self._params, self._anchor))
        return self.mu / 2 * total


def _count(num_samples):
    n = int(num_samples)
    if n < 0:
        raise Error("bad_argument", f"num_samples is {n}: it counts samples")
    return n


def _figures(metrics):
    if not metrics:
        return []
    return [(str(k), float(v)) for k, v in metrics.items()]


class Client:
    """A fedcaf client driven from Python.

    `config` is a client config file (configs/client_1.yaml), or None: no
    file, every key from the arguments and the defaults. `server_uri`
    ("10.0.0.5:50051") and `client_id` ("Client3") set those two keys;
    `set` overrides any key as `--set` does ({"comm_configs.tls.ca":
    "ca.pem"}). Without a file, a client needs only those two:

        client = fedcaf.Client(server_uri="10.0.0.5:50051", client_id="Client3")

    Without a file, those two default to the environment variables
    FEDCAF_SERVER_URI and FEDCAF_CLIENT_ID where they are set (and neither
    the argument nor set= gives the key): the deploy/ launchers set them
    for each client they start as a command (FEDCAF_CLIENT_CMD, a hosts
    file's `command` line; deploy/README.md), so there `fedcaf.Client()`
    is enough.

    `shard` makes this process one rank of a sharded client (a model trained
    by a multi-process job: every rank runs a Client with the same client
    id; the server joins their uploads into one update, one vote, one
    weight): `(rank, ranks)`, or "torchrun" to read RANK and WORLD_SIZE from
    the environment. It sets the config's shard.rank and shard.ranks. Each
    task then holds only this rank's rows of every tensor (by default
    torch.chunk(t, ranks, dim=0)[rank], as FSDP and ZeRO-3 shard): the
    task's layout, arrays and model_state are those local slices, and
    task.send takes them (under torch 2.x FSDP2: {name: p.to_local()}).
    Every rank must send the same num_samples (the client's total).
    `client.shard` is (rank, ranks), or None when `shard` was not given
    (ranks 1, as WORLD_SIZE 1 gives: the whole model, not sharded)."""

    def __init__(self, config=None, set=None, shard=None, server_uri=None,
                 client_id=None):
        named = {"comm_configs.grpc_configs.server_uri": server_uri,
                 "client_id": client_id}
        for key, value in named.items():
            if value is None:
                continue
            if key in (set or {}):
                raise Error("bad_argument", f"{key.split('.')[-1]}= and "
                            f"set={{{key!r}: ...}} both given: give one")
            set = dict(set or {}, **{key: value})
        if config is None:  # every key from set=, the launcher, the defaults
            for key, var in (("comm_configs.grpc_configs.server_uri",
                              "FEDCAF_SERVER_URI"),
                             ("client_id", "FEDCAF_CLIENT_ID")):
                if os.environ.get(var) and key not in (set or {}):
                    set = dict(set or {}, **{key: os.environ[var]})
            config = os.devnull
        overrides = [f"{k}={_yaml_scalar(v)}" for k, v in (set or {}).items()]
        self.shard = _shard_of(shard)
        if self.shard is not None:
            given = [k for k in (set or {}) if k in ("shard.rank", "shard.ranks")]
            if given:
                raise Error("bad_argument",
                            f"shard= and set={{{given[0]!r}: ...}} both set "
                            "the shard: give one")
            overrides += [f"shard.rank={self.shard[0]}",
                          f"shard.ranks={self.shard[1]}"]
        self._client = _fedcaf.Client(str(config), overrides)
        _departures.watch(self)

    def tasks(self):
        """Yields a Task per round until the run ends. Raises fedcaf.Error if
        the run fails for this client; Ctrl-C stops the client (it says
        goodbye: the server drops it at once, see leave)."""
        while True:
            try:
                t = self._client.next_task()
            except BaseException as e:
                self._leave_on(e)
                raise
            if t is None:
                return
            yield Task(t, self)

    def leave(self, reason="other", detail=""):
        """Leaves the run now: the client says goodbye with `reason`
        ("interrupted", "terminated", "userException", "wrongModel" or
        "other") and `detail` (why, in words, at most 512 bytes), so the
        server drops it at once instead of waiting reconnect_grace_s for it
        to come back, and logs why. Returns once the goodbye is written.
        Done for you when your program leaves otherwise: an exception out
        of your code (uncaught, or out of a `with fedcaf.Client(...)`
        block: userException with its type and message, wrongModel for a
        model that does not match the server's), Ctrl-C (interrupted),
        SIGTERM (terminated; the process exits 143) or the program ending
        before the run did (other)."""
        if self._client.ended():
            return
        self._client.leave(reason, detail)
        print(f"fedcaf: left the run ({_said(reason, detail)}): said goodbye "
              "to the server", file=sys.stderr, flush=True)

    def _leave_on(self, exc):
        """Leaves for exception `exc` (on its way out of the program)."""
        if not self._client.ended():
            self.leave(*_goodbye_of(exc))

    def report(self):
        """The client's run report (dict), once the run has ended."""
        return json.loads(self._client.report_json())

    def close(self):
        """Stops the client (if it still runs: it says goodbye, "other") and
        waits for it."""
        if not self._client.ended():
            self.leave("other", "closed by its program before the run ended")
        self._client.close()

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is not None:
            self._leave_on(exc)
        self.close()


# -- departures ----------------------------------------------------------------

_GOODBYE_WORDS = {"interrupted": "interrupted", "terminated": "terminated",
                  "userException": "an exception in its own code",
                  "wrongModel": "a wrong model", "other": "other"}


def _said(reason, detail):
    words = _GOODBYE_WORDS.get(reason, reason)
    return f"{words}: {detail}" if detail else words


def _goodbye_of(exc):
    """(reason, detail) of a program leaving on exception `exc`."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", "SIGINT"
    if isinstance(exc, _Terminated):
        return "terminated", "SIGTERM"
    if isinstance(exc, Error) and exc.code in ("manifest_mismatch",
                                               "unsupported_dtype"):
        return "wrongModel", str(exc)
    if isinstance(exc, SystemExit):
        return "other", f"the program exited ({exc.code})"
    return "userException", f"{type(exc).__name__}: {exc}"


class _Terminated(SystemExit):
    """SIGTERM, as the package's handler raises it (exit status 143)."""


class _Departures:
    """Says goodbye for every running Client of the process when the
    program leaves without doing so itself: an uncaught exception
    (sys.excepthook), SIGTERM (a handler, installed where none was) and
    the interpreter's exit (atexit)."""

    def __init__(self):
        self._clients = weakref.WeakSet()
        self._installed = False
        self._terminating = False

    def watch(self, client):
        self._clients.add(client)
        if self._installed:
            return
        self._installed = True
        previous_hook = sys.excepthook

        def hook(kind, exc, tb):
            self._leave_all(exc)
            previous_hook(kind, exc, tb)

        sys.excepthook = hook
        atexit.register(self._leave_all, None)
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL):
            signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, signum, frame):
        # Once: a second SIGTERM (timeout(1) sends one to the process and
        # one to its group) would raise in the middle of the first one's
        # goodbye, before its line is printed.
        if self._terminating:
            return
        self._terminating = True
        exc = _Terminated(128 + signum)
        self._leave_all(exc)
        raise exc

    def _leave_all(self, exc):
        for client in list(self._clients):
            try:
                if exc is None:
                    if not client._client.ended():
                        client.leave("other", "the program ended before the "
                                     "run did")
                else:
                    client._leave_on(exc)
            except Exception:  # the process is on its way out: never mask why
                pass


_departures = _Departures()


def _shard_of(shard):
    """(rank, ranks) of `shard` (None, a pair, or "torchrun"), checked."""
    if shard is None:
        return None
    if shard != "torchrun":
        try:
            rank, ranks = (int(x) for x in shard)
        except (TypeError, ValueError):
            raise Error("bad_argument", f"shard={shard!r}: give (rank, ranks) "
                        'or "torchrun"') from None
        if not 0 <= rank < ranks:
            raise Error("bad_argument", f"shard={shard!r}: the rank must be "
                        "from 0 to ranks - 1")
        return rank, ranks
    found = []
    for key in ("RANK", "WORLD_SIZE"):
        text = os.environ.get(key)
        if text is None:
            raise Error("bad_argument", f'shard="torchrun": {key} is not set '
                        "(start the ranks with torchrun, or set RANK and "
                        "WORLD_SIZE)")
        try:
            found.append(int(text))
        except ValueError:
            raise Error("bad_argument", f'shard="torchrun": {key} is '
                        f"{text!r}, not a whole number") from None
    rank, ranks = found
    if not 0 <= rank < ranks:
        raise Error("bad_argument", f'shard="torchrun": RANK {rank} is not '
                    f"from 0 to WORLD_SIZE - 1 (WORLD_SIZE {ranks})")
    return rank, ranks


def _yaml_scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def save_safetensors(state, path):
    """Writes `state` (name -> numpy array or tensor) as a safetensors file,
    one tensor at a time (fedcaf's server reads it as model_configs.path)."""
    arrays = [(name,) + _as_array(name, value) for name, value in state.items()]
    header, offset = {}, 0
    for name, a, kind in arrays:
        if kind not in _SAFETENSORS:
            raise Error("unsupported_dtype", f"tensor '{name}' is {kind}")
        n = a.size * a.itemsize
        header[name] = {"dtype": _SAFETENSORS[kind], "shape": list(a.shape),
                        "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, a, _ in arrays:
            f.write(memoryview(np.ascontiguousarray(a)).cast("B"))
