// What each configuration key does: the one table the reference's last
// column comes from. tests/unit/config/help_test.cpp holds it to the keys
// the readers record: a key without help, or help for no key, fails.

#include "fedcaf/config/help.hpp"

namespace fedcaf {

namespace {

constexpr key_help help_table[] = {
    // -- the top level of a server's file (simulate, server, a relay's)
    {"server_configs", "The server's keys: rounds, scheduler, aggregator, "
                       "memory, checkpoints, secure aggregation, relays and "
                       "its `comm_configs`. Required in a server's file."},
    {"client_configs", "What the server hands every client when it registers: "
                       "how to train, the model, the uploads' compression."},
    {"data_configs",
     "The data set and its partition: the server's (its test set) and a "
     "`fedcaf client`'s (its partition). A Python client's file needs none: "
     "one it has is its own code's, read by fedcaf not at all."},
    // -- the top level of a client's own file (fedcaf client, Python, relay)
    {"client_id",
     "A client's own file: its id, 1 to 128 printable ASCII characters other "
     "than space. Required (or APPFL's `train_configs.logging_id`)."},
    {"train_configs",
     "A client's own file: what is this host's (threads, storage folder, "
     "device); the rest of training comes from the server's `client_configs`."},
    {"comm_configs",
     "A client's own file: how it reaches the server (or a relay its parent)."},
    {"shard", "A client's own file: which rank of a sharded client this "
              "process is, and the rows it holds (see [Sharded "
              "clients](own-model.md#sharded-clients-torchrun-fsdp-zero))."},
    // -- server_configs
    {"server_configs.num_clients",
     "Clients the run is for: the server waits for this many to register."},
    {"server_configs.max_shard_ranks",
     "The most ranks one sharded client may have, each a connection of its "
     "own; a client of more is refused at its ranks' Hellos."},
    {"server_configs.num_global_epochs", "Rounds."},
    {"server_configs.scheduler",
     "`SyncScheduler` (rounds) or `AsyncScheduler` (each update as it "
     "arrives); unset, the one the aggregator needs (see [Aggregators and "
     "schedulers](aggregation.md))."},
    {"server_configs.scheduler_kwargs",
     "Who takes part in a round, and its deadlines."},
    {"server_configs.aggregator",
     "The server's rule: the sync ones, and `FedAsyncAggregator`, "
     "`FedBuffAggregator` (async); see [Aggregators and "
     "schedulers](aggregation.md)."},
    {"server_configs.aggregator_kwargs",
     "What the aggregator does with the updates (APPFL's names), update "
     "bounds, DP-FedAvg, per-tensor rules."},
    {"server_configs.evaluate",
     "Test each global model on the test set (`data_configs`)."},
    {"server_configs.memory_mode",
     "`ram`: the global model and a model-sized sum (about 2 x model); "
     "`window`: only `window` chunk positions open, each averaged into the "
     "model in place once every client delivered it (about 1 x model; sync "
     "rounds); `disk`: as `window`, the model in a file under `storage_dir` "
     "whose pages are given back after each chunk."},
    {"server_configs.storage_dir",
     "`memory_mode: disk`: the folder of the global model's working file "
     "(removed at once, freed at exit)."},
    {"server_configs.fold_threads",
     "Threads the server checks, folds and settles each chunk of an update "
     "on, its aggregator's own included (the same bits on any number); 0: a "
     "quarter of the host's cores, at most 16, none beside the aggregator's "
     "below 8 (the rest are the connections')."},
    {"server_configs.save_global_model",
     "Write each new global model to this safetensors file; `{round}` in the "
     "name becomes the round. Unset: none is written."},
    {"server_configs.device", "The server's device: `cpu` only."},
    {"server_configs.comm_configs",
     "The side its clients connect to: address, TLS, tokens, streams."},
    {"server_configs.secure_aggregation",
     "SecAgg+ (Bell et al. 2020): the server learns only the sum of the "
     "clients' weighted models (see [Secure aggregation](security.md))."},
    {"server_configs.relays",
     "`{ClientId: N}`: these clients are relays (`fedcaf relay`), each "
     "offering its group's partial sum and weighing at most N clients (see "
     "[Trees of aggregators](trees.md))."},
    {"server_configs.simulated_relays",
     "`simulate` only: run the `num_clients` clients under this many relays "
     "(`Relay1..R`, blocks of consecutive clients), a tree of aggregators in "
     "one process; 0: a flat run."},
    {"server_configs.simulated_clients",
     "A relay's file only: how many of its `num_clients` children run in its "
     "own process, as `simulate` runs them (ids `<client_id>-Client<i>`, "
     "partition i-1 of the file's `data_configs`); the rest connect over the "
     "network."},
    {"server_configs.federated_evaluation",
     "Clients evaluate each global model on their own data and the server "
     "averages their figures. Unset: on iff the clients train (not `dummy`) a "
     "model the server cannot evaluate (not the built-in CNN on "
     "Fashion-MNIST)."},
    {"server_configs.checkpoint",
     "After every `every_rounds`-th round and the last, write what the run "
     "needs to go on into `dir` (see [Restarting a run](restart.md)). Unset: "
     "no checkpoints."},
    {"logging_output_dirname",
     "APPFL's log folder; fedcaf logs to stderr and `--log-file`."},
    {"logging_output_filename",
     "APPFL's log file name; fedcaf logs to stderr and `--log-file`."},
    // -- server_configs.scheduler_kwargs
    {"server_configs.scheduler_kwargs.num_clients",
     "APPFL's place for the clients of the run: must equal "
     "`server_configs.num_clients`."},
    {"server_configs.scheduler_kwargs.clients_per_round",
     "Sample this many registered clients for each round, reproducibly from "
     "`seed` and the round; in `simulate` the clients are then a population: "
     "a client is spawned when drawn and sent away when a round opens "
     "without it (docs/design.md, \"A population of simulated clients\"). "
     "Unset: every client."},
    {"server_configs.scheduler_kwargs.seed",
     "The seed of the clients' sampling."},
    {"server_configs.scheduler_kwargs.min_clients",
     "A round may finalize with this many updates when clients dropped or "
     "missed the deadline; with fewer it fails, naming the missing. Unset: the "
     "clients of a round less one, or less a tenth of many (2 -> 1, 10 -> 9, "
     "100 -> 90)."},
    {"server_configs.scheduler_kwargs.round_deadline_s",
     "How long a round may take, uploads included: clients that have not "
     "delivered their whole update by then are cut off and sit the round out. "
     "Size it above the slowest honest round (training, download and upload at "
     "the slowest link: a 16 GB model over 1 Gbit/s takes about 5 min); 0: no "
     "deadline."},
    {"server_configs.scheduler_kwargs.registration_deadline_s",
     "How long the server waits for `num_clients` to register; then it starts "
     "with those registered if at least `min_clients`, else stops naming the "
     "ids that never came. 0: for ever."},
    {"server_configs.scheduler_kwargs.on_deadline",
     "When the deadline passes with fewer than `min_clients` updates: `fail` "
     "(the run stops, naming the missing) or `wait` (the round goes on once "
     "`min_clients` have delivered)."},
    {"server_configs.scheduler_kwargs.same_init_model",
     "APPFL's: every client starts from the server's model; only `true` is "
     "supported."},
    {"server_configs.scheduler_kwargs.client_fraction",
     "Instead of `clients_per_round`: that fraction of `num_clients`, in (0, "
     "1], rounded (at least 1)."},
    // -- server_configs.aggregator_kwargs
    {"server_configs.aggregator_kwargs.client_weights_mode",
     "How updates are weighted: `equal`, or by the clients' claimed "
     "`sample_size` (capped at `max_sample_size`); the robust rules and relays "
     "take `equal` only."},
    {"server_configs.aggregator_kwargs.server_learning_rate",
     "The server optimizers' eta (FedAvgM, FedAdam, FedYogi, FedAdagrad, "
     "FedBuff). Unset: 0.1 for FedAdam and FedYogi, else 1."},
    {"server_configs.aggregator_kwargs.server_adapt_param",
     "The adaptive optimizers' tau (FedAdam, FedYogi, FedAdagrad)."},
    {"server_configs.aggregator_kwargs.server_momentum_param_1",
     "beta1, in [0, 1): FedAvgM's momentum, FedAdam's and FedYogi's first "
     "moment."},
    {"server_configs.aggregator_kwargs.server_momentum_param_2",
     "beta2, in [0, 1): FedAdam's and FedYogi's second moment."},
    {"server_configs.aggregator_kwargs.alpha",
     "FedAsync's and FedBuff's mixing weight, in (0, 1]."},
    {"server_configs.aggregator_kwargs.staleness_fn",
     "FedAsync and FedBuff: how an update's weight falls with its staleness "
     "(Xie et al. 2019)."},
    {"server_configs.aggregator_kwargs.staleness_fn_kwargs",
     "The staleness function's parameters."},
    {"server_configs.aggregator_kwargs.staleness_fn_kwargs.a",
     "Above 0: `polynomial` weighs an update of staleness t `(t + 1)^-a`, "
     "`hinge` `1 / (a (t - b) + 1)` past b."},
    {"server_configs.aggregator_kwargs.staleness_fn_kwargs.b",
     "`hinge`: the staleness (0 or more) up to which an update weighs 1."},
    {"server_configs.aggregator_kwargs.K", "FedBuff: updates per server step."},
    {"server_configs.aggregator_kwargs.partial_updates",
     "A client dropped mid-upload: `discard` its update (the others send "
     "theirs again) or `keep` what it delivered (each chunk averages the "
     "updates that reached it). Unset: `keep` for a server's own clients, "
     "`discard` under secure aggregation and in trees; async rules always "
     "keep."},
    {"server_configs.aggregator_kwargs.max_update_norm",
     "Refuse an update whose L2 distance from the global model exceeds this; "
     "0: no bound."},
    {"server_configs.aggregator_kwargs.norm_bound",
     "Norm bounding (Sun et al. 2019), sync averaging rules, `memory_mode: "
     "ram`: an update further than this (L2) from the model its client "
     "received is scaled back to it, by the norm the client declares; 0: off."},
    {"server_configs.aggregator_kwargs.max_update_ratio",
     "Refuse an update whose L2 distance from the global model g exceeds this "
     "many times max(norm of g, `update_norm_floor`); not under secure "
     "aggregation. 0: off (see [What one client can still "
     "do](security.md#what-one-client-can-still-do))."},
    {"server_configs.aggregator_kwargs.update_norm_floor",
     "The least norm of g that `max_update_ratio` is taken of, so a model near "
     "zero still takes updates; positive."},
    {"server_configs.aggregator_kwargs.max_norm_growth",
     "The norm `max_update_ratio` is taken of follows that of g down at once "
     "and up by at most this factor per round; at least 1, or 0: that of g "
     "itself."},
    {"server_configs.aggregator_kwargs.max_sample_size",
     "A client's claimed sample count (its weight under `sample_size`, and its "
     "evaluations' weight) is capped at this; positive."},
    {"server_configs.aggregator_kwargs.trim_ratio",
     "`TrimmedMeanAggregator` only: the fraction of each coordinate's values "
     "dropped from each end, in [0, 0.5) (Flower's FedTrimmedAvg `beta`)."},
    {"server_configs.aggregator_kwargs.tensor_rules",
     "Per tensor name pattern (`*`, `?`, `[...]`; the first that matches "
     "decides), what the server does with it; a tensor no pattern matches is "
     "averaged (see [Bring your own model](own-model.md))."},
    {"server_configs.aggregator_kwargs.tensor_rules.<pattern>",
     "`average` the tensors the pattern matches, or `keep` the server's value "
     "whatever clients send; a pattern that matches no tensor stops the server "
     "at start."},
    {"server_configs.aggregator_kwargs.optimize_memory",
     "APPFL's memory switch; fedcaf's is `memory_mode`."},
    {"server_configs.aggregator_kwargs.gradient_based",
     "APPFL's; fedcaf's clients always send models."},
    {"server_configs.aggregator_kwargs.dp_fedavg",
     "User-level DP-FedAvg (McMahan et al. 2018): clients clip their update, "
     "the server adds Gaussian noise; FedAvgAggregator with equal weights only "
     "(see [Differential privacy](security.md#differential-privacy))."},
    {"server_configs.aggregator_kwargs.dp_fedavg.clip_norm",
     "The L2 norm every client clips its update (trained minus received model) "
     "to; required."},
    {"server_configs.aggregator_kwargs.dp_fedavg.noise_multiplier",
     "The noise's std is `noise_multiplier * clip_norm / m` per averaged "
     "element (m: the updates averaged there)."},
    {"server_configs.aggregator_kwargs.dp_fedavg.delta",
     "Each round's report gives `dp_epsilon` at this delta (RDP accountant); "
     "in (0, 1)."},
    {"server_configs.aggregator_kwargs.dp_fedavg.seed",
     "The seed of the server's noise."},
    // -- comm_configs: a client's own, and server_configs.comm_configs
    {"comm_configs.grpc_configs",
     "Where a peer connects, message size, TLS and tokens (APPFL's name for "
     "fedcaf's own transport)."},
    {"comm_configs.grpc_configs.server_uri",
     "`host:port` of the server this client connects to."},
    {"server_configs.comm_configs.grpc_configs.server_uri",
     "`host:port` the server listens on."},
    {"comm_configs.grpc_configs.max_message_size",
     "The largest frame, in bytes; a chunk and its header must fit in it."},
    {"comm_configs.grpc_configs.use_model_chunking",
     "`false`: the model crosses as one message, as without chunking in APPFL "
     "(it must then fit `max_message_size`)."},
    {"comm_configs.grpc_configs.use_ssl",
     "Mutual TLS: both sides need their certificate, its key and "
     "`root_certificate`; a missing one stops the command (no fallback to "
     "unauthenticated TLS)."},
    {"server_configs.comm_configs.grpc_configs.server_certificate",
     "`use_ssl`: the server's certificate (PEM); make one with "
     "`deploy/make-certs.sh`."},
    {"server_configs.comm_configs.grpc_configs.server_certificate_key",
     "`use_ssl`: the key of the server's certificate."},
    {"comm_configs.grpc_configs.root_certificate",
     "`use_ssl`: the CA that signed the server's certificate."},
    {"server_configs.comm_configs.grpc_configs.root_certificate",
     "`use_ssl`: the CA of the clients' certificates; a certificate's common "
     "name must equal the client id it registers as."},
    {"comm_configs.grpc_configs.client_certificate",
     "`use_ssl`: this client's certificate (PEM), its common name its "
     "`client_id`."},
    {"comm_configs.grpc_configs.client_certificate_key",
     "`use_ssl`: the key of this client's certificate."},
    {"comm_configs.grpc_configs.use_authenticator",
     "Tokens (APPFL's NaiveAuthenticator): the server holds one per client id, "
     "a client sends its own; reports show secrets as `<redacted>`."},
    {"comm_configs.grpc_configs.authenticator",
     "APPFL's authenticator class: `NaiveAuthenticator`, the only one."},
    {"comm_configs.grpc_configs.authenticator_args", "The tokens."},
    {"server_configs.comm_configs.grpc_configs.authenticator_args.tokens",
     "`{ClientId: token}`: a token per client (relays included)."},
    {"server_configs.comm_configs.grpc_configs.authenticator_args.tokens_file",
     "A YAML file holding the `tokens` mapping, kept out of the config."},
    {"comm_configs.grpc_configs.authenticator_args.auth_token",
     "This client's token."},
    {"comm_configs.grpc_configs.authenticator_args.auth_token_file",
     "A file whose first line is this client's token, kept out of the config."},
    {"comm_configs.stream_configs",
     "fedcaf's transfer keys: chunks, the credit window, timeouts, heartbeats, "
     "connection limits."},
    {"comm_configs.stream_configs.chunk_bytes",
     "Payload bytes per chunk. Unset: 1 MiB, or `max_message_size` less 1 KiB "
     "where that is less."},
    {"comm_configs.stream_configs.window",
     "Chunks unacknowledged per stream (the credit window); also the chunk "
     "positions open in `window` and `disk` memory modes."},
    {"comm_configs.stream_configs.idle_timeout_s",
     "A transfer is stalled only after this long without any chunk or credit "
     "moving, however slow the link (in one process it then fails; a remote "
     "client registers again and resumes)."},
    {"comm_configs.stream_configs.min_rate_bytes_per_s",
     "Server: an upload slower than this over the last `rate_window_s` of the "
     "time it could send is ended and its client leaves the round (default: a "
     "512 kbit/s link; a client at 256 kbit/s needs 32768); 0: no minimum."},
    {"comm_configs.stream_configs.rate_window_s",
     "Server: the window `min_rate_bytes_per_s` is measured over (at least two "
     "chunks at that rate)."},
    {"comm_configs.stream_configs.heartbeat_s",
     "Between processes, each end sends a heartbeat this often."},
    {"comm_configs.stream_configs.connection_timeout_s",
     "Between processes, a connection on which nothing arrived this long (a "
     "silent peer) is dropped; above `heartbeat_s`."},
    {"comm_configs.stream_configs.reconnect_grace_s",
     "How long this client keeps trying to reach a lost server (long enough "
     "for its restart, see [Restarting a run](restart.md))."},
    {"server_configs.comm_configs.stream_configs.reconnect_grace_s",
     "How long a lost client may take to come back and resume before it is "
     "dropped."},
    {"comm_configs.stream_configs.handshake_timeout_s",
     "Server: a connection must finish its TLS handshake and its Hello within "
     "this time, or it is closed."},
    {"comm_configs.stream_configs.connect_timeout_s",
     "Client: its first connection keeps trying this long where nothing "
     "answers at `server_uri`, then gives up in one line; an unknown host, or "
     "a peer that does not speak fedcaf, ends it at once."},
    {"comm_configs.stream_configs.max_unauthenticated",
     "Server: connections not yet welcomed at once; one more makes the oldest "
     "of them give way, so idle connections cannot keep a client out."},
    {"comm_configs.stream_configs.refusal_log_lines",
     "Server: refusals at the gateways logged per peer host every 10 s; the "
     "rest are counted and summed up in one line."},
    // -- server_configs.secure_aggregation
    {"server_configs.secure_aggregation.enabled",
     "Mask every upload (SyncScheduler, float32 models; window and disk modes "
     "with FedAvg only)."},
    {"server_configs.secure_aggregation.threshold",
     "How many surviving holders unmask a client (it and its neighbours); 0: "
     "floor(neighbours / 2) + 1."},
    {"server_configs.secure_aggregation.clipping_range",
     "Weighted model values are clipped to [-c, c] before they are quantized."},
    {"server_configs.secure_aggregation.quantization_bits",
     "Bits per quantized value, 1 to 31; n clients x (2^b - 1) must stay below "
     "2^32."},
    {"server_configs.secure_aggregation.neighbours",
     "The clients each client shares its secrets with (at most 254); 0: every "
     "other client."},
    // -- server_configs.checkpoint
    {"server_configs.checkpoint.dir",
     "The folder checkpoints are written to; required."},
    {"server_configs.checkpoint.every_rounds",
     "Write one after every this many rounds (and after the last)."},
    {"server_configs.checkpoint.keep", "The newest checkpoints kept."},
    {"server_configs.checkpoint.on_error",
     "A checkpoint that cannot be written: `stop` the run, or `continue` "
     "(logged and skipped)."},
    // -- client_configs
    {"client_configs.train_configs", "How clients train."},
    {"client_configs.model_configs",
     "The model: its kind, shape, initial weights."},
    {"client_configs.comm_configs",
     "The clients' side of the transfer: compression."},
    {"client_configs.data_readiness_configs",
     "APPFL's data readiness report; fedcaf makes none."},
    // -- client_configs.train_configs
    {"client_configs.train_configs.trainer",
     "`VanillaTrainer` (LibTorch), `dummy` (trains nothing; for tests and "
     "benchmarks) or `python` (fedcaf's Python client trains with its own "
     "code; `fedcaf server` only)."},
    {"client_configs.train_configs.add",
     "`dummy`: added to every element, so a round's result is checkable by "
     "arithmetic."},
    {"client_configs.train_configs.add_by_index",
     "`dummy`: client i (its partition, from 0) adds `add * (i + 1)`, so "
     "updates differ."},
    {"client_configs.train_configs.noise",
     "`dummy`: also adds to each float32 element a pseudo-random value uniform "
     "in [-noise, noise), for benchmarks whose updates must not compress like "
     "a constant; 0: none."},
    {"client_configs.train_configs.federated_evaluation",
     "Set by the server from `server_configs.federated_evaluation`: evaluate "
     "each global model on the client's own test data."},
    {"client_configs.train_configs.proximal_mu",
     "FedProx's mu: the local loss gets mu / 2 times the squared L2 distance "
     "from the model received (see [FedProx](aggregation.md#fedprox)); 0: "
     "plain local training."},
    {"client_configs.train_configs.declare_update_norm",
     "Set by the server when `aggregator_kwargs.norm_bound` is on: the client "
     "declares its update's L2 norm in its offer."},
    {"client_configs.train_configs.update_clip_norm",
     "Set by the server from `dp_fedavg.clip_norm`: the client clips its "
     "update to this L2 norm; 0: no clipping."},
    {"client_configs.train_configs.storage",
     "`dummy`: the model lives on the heap (`ram`) or in a file whose pages "
     "are given back after use (`disk`; a remote client's under its own file's "
     "`train_configs.storage_dir`)."},
    {"client_configs.train_configs.storage_dir",
     "`simulate`: the folder of `storage: disk` clients' model files (a remote "
     "client uses its own file's `train_configs.storage_dir`)."},
    {"client_configs.train_configs.mode",
     "`epoch`: `num_local_epochs` passes over the partition; `step`: "
     "`num_local_steps` optimizer steps."},
    {"client_configs.train_configs.num_local_epochs",
     "`mode: epoch`: passes over the local data per round."},
    {"client_configs.train_configs.num_local_steps",
     "`mode: step`: optimizer steps per round."},
    {"client_configs.train_configs.optim",
     "The local optimizer: `SGD` or `Adam`."},
    {"client_configs.train_configs.optim_args",
     "The local optimizer's arguments."},
    {"client_configs.train_configs.optim_args.lr", "Learning rate; above 0."},
    {"client_configs.train_configs.optim_args.momentum", "SGD's momentum."},
    {"client_configs.train_configs.optim_args.weight_decay",
     "L2 weight decay."},
    {"client_configs.train_configs.train_batch_size",
     "Samples per training batch (DP-SGD: the expected Poisson sample)."},
    {"client_configs.train_configs.val_batch_size",
     "Samples per evaluation batch."},
    {"client_configs.train_configs.loss_fn",
     "`cross_entropy` or `nll` (labels are class ids), `mse` or "
     "`bce_with_logits` (labels are float targets shaped like the output); "
     "APPFL's class names are read as these."},
    {"client_configs.train_configs.device",
     "The LibTorch trainer's device: `cpu`, or `cuda` iff the LibTorch fedcaf "
     "was built with has CUDA (Debian's has none)."},
    {"client_configs.train_configs.num_threads",
     "LibTorch intra-op threads; 0: all cores. A client's own "
     "`train_configs.num_threads` wins where given."},
    {"client_configs.train_configs.dp",
     "DP-SGD in the LibTorch trainer (see [Differential "
     "privacy](security.md#differential-privacy))."},
    {"client_configs.train_configs.dp.mode",
     "How per-sample gradient norms are computed: `none` (DP-SGD off), "
     "`per_sample`, `ghost` or `fused`; the built-in CNN with VanillaTrainer "
     "only."},
    {"client_configs.train_configs.dp.noise_multiplier",
     "The noise's std is `noise_multiplier * max_grad_norm`; 0: no noise."},
    {"client_configs.train_configs.dp.max_grad_norm",
     "Every per-sample gradient is clipped to this L2 norm."},
    {"client_configs.train_configs.dp.poisson_sampling",
     "Poisson samples of rate `train_batch_size / local samples`; `false`: "
     "shuffled batches (epsilon computed as if Poisson, as Opacus does)."},
    {"client_configs.train_configs.dp.delta",
     "The reports give epsilon at this delta; in (0, 1)."},
    {"client_configs.train_configs.use_dp",
     "APPFL's DP switch: with `dp_mechanism: opacus` it is DP-SGD (`dp`, mode "
     "`fused`) with `dp_config`'s figures; APPFL's output perturbation has no "
     "counterpart and is refused."},
    {"client_configs.train_configs.dp_mechanism",
     "APPFL's, with `use_dp`: `opacus` is read as DP-SGD; `laplace` and "
     "`gaussian` are refused."},
    {"client_configs.train_configs.dp_config",
     "APPFL's, with `use_dp` and `dp_mechanism: opacus`: read as `dp`."},
    {"client_configs.train_configs.dp_config.mode",
     "As `train_configs.dp.mode` (`fused` where unset)."},
    {"client_configs.train_configs.dp_config.noise_multiplier",
     "As `train_configs.dp.noise_multiplier`."},
    {"client_configs.train_configs.dp_config.max_grad_norm",
     "As `train_configs.dp.max_grad_norm`."},
    {"client_configs.train_configs.dp_config.poisson_sampling",
     "As `train_configs.dp.poisson_sampling`."},
    {"client_configs.train_configs.dp_config.delta",
     "As `train_configs.dp.delta`."},
    {"client_configs.train_configs.loss_fn_path",
     "APPFL's Python file of the loss: refused (fedcaf's trainer runs no "
     "Python; see [Bring your own model](own-model.md))."},
    {"client_configs.train_configs.metric_path",
     "APPFL's Python file of the metric: refused (fedcaf evaluates accuracy "
     "and loss)."},
    {"client_configs.train_configs.do_validation",
     "APPFL's; fedcaf evaluates on the server, or on the clients with "
     "`federated_evaluation`."},
    {"client_configs.train_configs.do_pre_validation",
     "APPFL's; fedcaf evaluates on the server, or on the clients with "
     "`federated_evaluation`."},
    {"client_configs.train_configs.metric_name",
     "APPFL's; fedcaf reports accuracy and loss."},
    {"client_configs.train_configs.epsilon",
     "APPFL's output perturbation's epsilon; fedcaf's DP is `dp` and "
     "`dp_fedavg`."},
    {"client_configs.train_configs.clip_grad",
     "APPFL's batch gradient clipping; not done."},
    {"client_configs.train_configs.clip_value",
     "APPFL's batch gradient clipping; not done."},
    {"client_configs.train_configs.clip_norm",
     "APPFL's batch gradient clipping; not done."},
    {"client_configs.train_configs.train_data_shuffle",
     "APPFL's; fedcaf always shuffles training data."},
    {"client_configs.train_configs.val_data_shuffle",
     "APPFL's; evaluation order does not matter."},
    {"client_configs.train_configs.loss_fn_name",
     "APPFL's class in the `loss_fn_path` file; without that file the loss is "
     "`loss_fn`."},
    // -- client_configs.model_configs
    {"client_configs.model_configs.name",
     "The model: `CNN` (built in, Fashion-MNIST), `torchscript` (a TorchScript "
     "file), `safetensors` (a layout the clients' Python code trains), "
     "`synthetic` or `llama` (layouts for the `dummy` trainer)."},
    {"client_configs.model_configs.model_name",
     "APPFL's name for `name`, read where `name` is absent."},
    {"client_configs.model_configs.preset",
     "`llama`: the Hugging Face shape preset."},
    {"client_configs.model_configs.path",
     "The initial model: a safetensors file (required for `safetensors`), or "
     "the TorchScript file (required for `torchscript`). Unset: drawn from "
     "`seed`."},
    {"client_configs.model_configs.seed", "The seed of the initial weights."},
    {"client_configs.model_configs.num_tensors",
     "`synthetic`: float tensors of about equal size."},
    {"client_configs.model_configs.total_bytes",
     "`synthetic`: the bytes its tensors add up to."},
    {"client_configs.model_configs.dtype",
     "`synthetic` and `llama`: the element type (not CNN)."},
    {"client_configs.model_configs.model_kwargs", "The built-in CNN's shape."},
    {"client_configs.model_configs.model_kwargs.num_channel",
     "Input channels."},
    {"client_configs.model_configs.model_kwargs.num_classes",
     "Output classes."},
    {"client_configs.model_configs.model_kwargs.num_pixel",
     "Image side: 28 (the CNN is built for 28 x 28 images)."},
    {"client_configs.model_configs.model_path",
     "APPFL's Python file of the model: refused (use the Python client, or "
     "TorchScript; see [Bring your own model](own-model.md))."},
    // -- client_configs.comm_configs
    {"client_configs.comm_configs.compression",
     "Per-chunk compression of uploads (deltas), downloads or both (see "
     "[Compression](large-models.md#compression))."},
    {"client_configs.comm_configs.compression.method",
     "`none`, `fp16`, `bf16`, `int8` or `zfp`."},
    {"client_configs.comm_configs.compression.direction",
     "`up` (uploads, as deltas: needs `memory_mode: ram` and SyncScheduler), "
     "`down` or `both`."},
    {"client_configs.comm_configs.compression.zfp_tolerance",
     "`zfp`: the absolute error bound of every value."},
    {"client_configs.comm_configs.compression.error_feedback",
     "Uploads: what compression lost is carried into the client's next "
     "update."},
    {"client_configs.comm_configs.compressor_configs",
     "APPFL's compressor, read as `compression` where it means the same: on, "
     "with an `ABS` bound, it is `zfp` on uploads within `error_bound`; off or "
     "`REL`, nothing is compressed."},
    {"client_configs.comm_configs.compressor_configs.enable_compression",
     "APPFL's compression switch."},
    {"client_configs.comm_configs.compressor_configs.error_bounding_mode",
     "`ABS` (read as `zfp_tolerance`) or `REL` (no counterpart: the block is "
     "ignored)."},
    {"client_configs.comm_configs.compressor_configs.error_bound",
     "`ABS`: the bound every value stays within; above 0."},
    {"client_configs.comm_configs.compressor_configs.lossy_compressor",
     "APPFL's error-bounded compressor (SZ2, SZ3, SZx, ZFP): each is read as "
     "`zfp`."},
    {"client_configs.comm_configs.compressor_configs.lossless_compressor",
     "APPFL's lossless stage; no counterpart."},
    {"client_configs.comm_configs.compressor_configs.flat_model_dtype",
     "APPFL's; no counterpart."},
    {"client_configs.comm_configs.compressor_configs.param_cutoff",
     "APPFL's; zfp encodes every float tensor."},
    // -- data_configs
    {"data_configs.dataset_name",
     "`FashionMNIST` (IDX files under `dataset_path`) or `tensors` (the "
     "`dataset_kwargs` files)."},
    {"data_configs.dataset_path",
     "The Fashion-MNIST IDX files' folder (gzip or plain, checked when read)."},
    {"data_configs.dataset_kwargs", "The partition, and `tensors`' files."},
    {"data_configs.dataset_path_py",
     "APPFL's Python dataset loader: refused (use the Python client; see "
     "[Bring your own model](own-model.md))."},
    {"data_configs.dataset_kwargs.train_features",
     "`tensors`: the training inputs, a `.npy` or `.safetensors` file "
     "(`x.safetensors:NAME` names one tensor of it); required."},
    {"data_configs.dataset_kwargs.train_labels",
     "`tensors`: the training labels; required."},
    {"data_configs.dataset_kwargs.test_features",
     "`tensors`: the test inputs; optional, with `test_labels`."},
    {"data_configs.dataset_kwargs.test_labels",
     "`tensors`: the test labels; optional, with `test_features`."},
    {"data_configs.dataset_kwargs.num_clients",
     "The partitions the data is split into: in a server's file, "
     "`server_configs.num_clients` (its default, and the only value allowed); "
     "required in a `fedcaf client`'s."},
    {"data_configs.dataset_kwargs.client_id",
     "A `fedcaf client`: its partition, from 0, below `num_clients`."},
    {"data_configs.dataset_kwargs.partition_strategy",
     "`iid`, `class_noniid` (`classes_per_client` classes each) or "
     "`dirichlet_noniid` (`dirichlet_alpha`)."},
    {"data_configs.dataset_kwargs.classes_per_client",
     "`class_noniid`: classes per client."},
    {"data_configs.dataset_kwargs.dirichlet_alpha",
     "`dirichlet_noniid`: the concentration; smaller, more skew."},
    {"data_configs.dataset_kwargs.seed", "The seed of the partition."},
    {"data_configs.dataset_kwargs.visualization",
     "APPFL's plot of the partition; fedcaf draws none."},
    {"data_configs.dataset_kwargs.output_dirname",
     "APPFL's plot's folder; fedcaf draws none."},
    {"data_configs.dataset_kwargs.output_filename",
     "APPFL's plot's file; fedcaf draws none."},
    // -- a client's own train_configs
    {"train_configs.logging_id",
     "APPFL's older name of the client's id, read as `client_id` where that is "
     "absent; with `client_id` it is ignored."},
    {"train_configs.num_threads",
     "This host's LibTorch intra-op threads, over the server's "
     "`client_configs.train_configs.num_threads`; 0: the server's."},
    {"train_configs.storage_dir",
     "Where `storage: disk` keeps this client's model file; must be a folder. "
     "Unset: `$TMPDIR` where set, else `/tmp`."},
    {"train_configs.device",
     "Checked when read: `cpu`, or `cuda` iff LibTorch has CUDA (the trainer "
     "runs on `client_configs.train_configs.device`); a Python client's own "
     "code picks its device."},
    // -- shard
    {"shard.ranks", "The ranks of this sharded client."},
    {"shard.rank", "This process's rank, from 0, below `ranks`."},
    {"shard.slices",
     "The rows each tensor's slice holds, instead of `torch.chunk`'s dim-0 "
     "chunk; tensors it does not name, it holds nothing of."},
    {"shard.slices.<tensor>",
     "`[begin_row, end_row]`: the rows of that tensor this rank holds."},
};

} // namespace

std::span<const key_help> config_help() {
  return help_table;
}

bool help_names(std::string_view entry, std::string_view path) {
  if (path.size() == entry.size())
    return path == entry;
  return path.size() > entry.size() && path.ends_with(entry) &&
         path[path.size() - entry.size() - 1] == '.';
}

std::string_view help_of(std::string_view path) {
  const key_help* best = nullptr;
  for (const auto& h : help_table)
    if (help_names(h.path, path) &&
        (!best || h.path.size() > best->path.size()))
      best = &h;
  return best ? best->help : std::string_view{};
}

} // namespace fedcaf
