// fedcaf._fedcaf: the C++ client (actor, gateway, TLS, resume) embedded in
// Python. The Python package (python/fedcaf/__init__.py) wraps it; arrays
// cross through the buffer protocol, never copied. Thread-safety: the
// client runs on its own threads; Python objects are touched only with the
// GIL held, and every wait releases it.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "actors/remote.hpp"
#include "fedcaf/carried.hpp"
#include "fedcaf/memory_probe.hpp"
#include "fedcaf/report.hpp"
#include "task_bridge.hpp"

namespace py = pybind11;

namespace fedcaf::py_client {

using py_task_bridge = fedcaf::bridge::task_bridge;
using fedcaf::bridge::figures;
using fedcaf::bridge::model_memory;
using fedcaf::bridge::task_info;

/// A fedcaf error on its way to Python as fedcaf.Error(code, message).
struct raised {
  std::string code;
  std::string message;
};

[[noreturn]] void raise(const error& e) {
  throw raised{to_string(e.code), e.message};
}

/// How often a wait looks at Python's signals (Ctrl-C).
constexpr auto signal_slice = std::chrono::milliseconds{100};

/// numpy's spelling of a dtype; bfloat16 travels as uint16 (numpy has no
/// bfloat16), ready for torch.frombuffer(..., dtype=torch.bfloat16).
const char* numpy_format(dtype t) {
  switch (t) {
  case dtype::float32:
    return "float32";
  case dtype::float16:
    return "float16";
  case dtype::bfloat16:
    return "uint16";
  case dtype::float64:
    return "float64";
  case dtype::int64:
    return "int64";
  case dtype::int32:
    return "int32";
  case dtype::uint8:
    return "uint8";
  case dtype::int16:
    return "int16";
  case dtype::int8:
    return "int8";
  case dtype::boolean:
    return "bool";
  }
  return "uint8";
}

/// The dtype a name from the Python side stands for ("float32",
/// "bfloat16", ...), or an error.
result<dtype> dtype_named(const std::string& name) {
  static const std::map<std::string, dtype> names{
      {"float32", dtype::float32},   {"float16", dtype::float16},
      {"bfloat16", dtype::bfloat16}, {"float64", dtype::float64},
      {"int64", dtype::int64},       {"int32", dtype::int32},
      {"uint8", dtype::uint8},       {"int16", dtype::int16},
      {"int8", dtype::int8},         {"bool", dtype::boolean}};
  auto it = names.find(name);
  if (it == names.end())
    return error{errc::unsupported_dtype,
                 "dtype " + name + " is not one fedcaf carries"};
  return it->second;
}

std::string dtype_label(dtype t) {
  return t == dtype::bfloat16 ? "bfloat16" : numpy_format(t);
}

/// Runs one client and hands its tasks to Python.
class client_handle {
public:
  client_handle(const std::string& config_path,
                const std::vector<std::string>& overrides)
      : bridge_(std::make_shared<py_task_bridge>()) {
    auto cfg =
        load_config_file(config_path, config_role::python_client, overrides);
    if (!cfg)
      raise(cfg.err());
    if (auto warning = ignored_keys_warning(*cfg); !warning.empty())
      std::fprintf(stderr, "fedcaf: %s\n", warning.c_str());
    cfg_ = std::move(*cfg);
    tune_malloc_for_streams();
    thread_ = std::thread([this] { run(); });
  }

  ~client_handle() {
    stop({errc::cancelled, "the client was closed"});
    py::gil_scoped_release unlocked;
    if (thread_.joinable())
      thread_.join();
  }

  client_handle(const client_handle&) = delete;
  client_handle& operator=(const client_handle&) = delete;

  /// The next task, or None when the run has ended. Raises the run's
  /// failure, and KeyboardInterrupt (after stopping the client) on Ctrl-C.
  py::object next_task() {
    for (;;) {
      task_info info;
      py_task_bridge::wait_result r;
      {
        py::gil_scoped_release unlocked;
        r = bridge_->next_task(signal_slice, info);
      }
      if (r == py_task_bridge::wait_result::ready) {
        pins_.clear(); // the previous update is no longer read
        widened_.clear();
        return py::cast(task{this, std::move(info), false});
      }
      if (r == py_task_bridge::wait_result::ended)
        return finished();
      check_signals();
    }
  }

  /// True once the run is over for this client: the server's Done came,
  /// or the client was closed or left.
  bool cancelled() const { return bridge_->run_over() || stop_requested_; }

  /// Stops the client: its waits end and the run ends for it.
  void stop(const error& why) {
    stop_requested_ = true;
    bridge_->cancel(why);
    std::lock_guard<std::mutex> guard{mtx_};
    if (client_)
      caf::anon_send_exit(client_, caf::exit_reason::user_shutdown);
  }

  /// The program leaves the run (`reason`: "interrupted", "terminated",
  /// "userException", "wrongModel" or "other"; `detail`: why, in words):
  /// the client says goodbye, so the server drops it at once, and ends.
  /// Returns once it has ended (its goodbye written). Nothing happens
  /// once the run has ended.
  void leave(const std::string& reason, const std::string& detail) {
    static const std::map<std::string, msg::goodbye_reason> reasons{
        {"interrupted", msg::goodbye_reason::interrupted},
        {"terminated", msg::goodbye_reason::terminated},
        {"userException", msg::goodbye_reason::user_exception},
        {"wrongModel", msg::goodbye_reason::wrong_model},
        {"other", msg::goodbye_reason::other}};
    auto it = reasons.find(reason);
    if (it == reasons.end())
      raise({errc::bad_argument,
             "leave: reason '" + reason +
                 "' is none of interrupted, terminated, userException, "
                 "wrongModel, other"});
    msg::goodbye why{it->second, detail};
    leaving_->note(why);    // whatever ends the client now, it says this
    stop_requested_ = true; // a client still connecting stops there
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (client_) // wakes a client between rounds
        caf::anon_send(client_, goodbye_atom::value, msg::encode(why));
    }
    bridge_->cancel({errc::cancelled, "left the run"});
    py::gil_scoped_release unlocked;
    if (thread_.joinable())
      thread_.join();
  }

  /// True once the client's run has ended (it can no longer leave).
  bool ended() const { return bridge_->ended(); }

  /// Waits for the client's threads to end.
  void close() {
    stop({errc::cancelled, "the client was closed"});
    py::gil_scoped_release unlocked;
    if (thread_.joinable())
      thread_.join();
  }

  /// The run report as JSON (complete once the run has ended).
  std::string report_json() {
    if (!bridge_->ended())
      return "{}";
    return to_json(report_);
  }

  /// One round handed to Python.
  struct task {
    client_handle* owner;
    task_info info;
    bool evaluated = false; ///< a training task's model was evaluated

    py::dict arrays() const;
    py::list layout() const;
    void send(const py::list& tensors, uint64_t samples,
              const figures& train_figures);
    void evaluate(uint64_t samples, const figures& eval_figures);
  };

private:
  void run() {
    auto bridge = bridge_;
    auto needs_writable = &writable_update_;
    auto mu = &proximal_mu_;
    trainer_factory factory =
        [bridge, needs_writable,
         mu](const client_configs& cc,
             const msg::welcome&) -> result<std::unique_ptr<trainer>> {
      // DP-FedAvg: the client clips the update in place.
      needs_writable->store(cc.train.update_clip_norm > 0);
      mu->store(cc.train.proximal_mu);
      return fedcaf::bridge::make_bridge_trainer(bridge, cc);
    };
    run_remote_client(
        cfg_.client, std::move(factory), report_,
        [this](caf::actor_system&, const client_actor& c) {
          std::lock_guard<std::mutex> guard{mtx_};
          client_ = c;
          if (stop_requested_) // stopped while it was connecting
            caf::anon_send_exit(client_, caf::exit_reason::user_shutdown);
        },
        &stop_requested_, nullptr, leaving_, bridge_->run_over_flag());
    {
      std::lock_guard<std::mutex> guard{mtx_};
      client_ = client_actor{};
    }
    report_.config_yaml = cfg_.effective_yaml;
    bridge_->run_ended(report_.failure);
  }

  py::object finished() {
    auto failure = bridge_->failure();
    if (failure.empty())
      return py::none();
    auto colon = failure.find(": ");
    if (colon == std::string::npos)
      throw raised{"internal", failure};
    throw raised{failure.substr(0, colon), failure.substr(colon + 2)};
  }

  /// Python's signal handlers run here; one that raises (Ctrl-C's
  /// KeyboardInterrupt, the package's SIGTERM handler) ends the wait, and
  /// the package says goodbye on its way out.
  void check_signals() {
    if (PyErr_CheckSignals() == 0)
      return;
    throw py::error_already_set();
  }

  /// Sends an evaluation of the model the client holds.
  void send_evaluation(const msg::evaluation& e) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (client_)
      caf::anon_send(client_, evaluated_atom::value, msg::encode(e));
  }

  /// Views of an update's memory in layout order, and the Python buffers
  /// that keep it in place.
  struct pinned_update {
    model_view view;
    std::vector<py::buffer_info> pins;
    /// Integer and bool tensors, widened to the model's floating dtype.
    std::vector<std::vector<std::byte>> widened;
  };

  /// Checks Python's tensors against the model's layout and pins them.
  pinned_update pin_update(const task_info& info, const py::list& tensors);

  std::shared_ptr<py_task_bridge> bridge_;
  config cfg_;
  run_report report_; ///< written by the client; read after run_ended
  std::thread thread_;
  std::mutex mtx_;
  client_actor client_; ///< while the client runs
  std::atomic<bool> writable_update_{false};

public:
  /// train_configs.proximal_mu from the server (FedProx), for Python.
  std::atomic<double> proximal_mu_{0};

private:
  std::atomic<bool> stop_requested_{false};
  std::shared_ptr<departure> leaving_ = std::make_shared<departure>();
  /// The update's buffers, held until the next task: the client may be
  /// asked to send it again.
  std::vector<py::buffer_info> pins_;
  std::vector<std::vector<std::byte>> widened_; ///< as pins_, converted
};

py::dict client_handle::task::arrays() const {
  py::dict out;
  const auto& model = info.model;
  if (!model)
    return out;
  // One capsule keeps the received memory alive for every array.
  auto* keep = new std::shared_ptr<model_memory>(model);
  py::capsule base{keep, [](void* p) {
                     delete static_cast<std::shared_ptr<model_memory>*>(p);
                   }};
  uint64_t offset = 0;
  for (const auto& t : model->layout.tensors) {
    std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
    auto received =
        std::span<const std::byte>{model->bytes.data() + offset, t.byte_size};
    if (t.held) { // an integer or bool tensor: rounded back, in its own array
      py::array a{py::dtype{numpy_format(*t.held)}, shape};
      narrow(t, received,
             {static_cast<std::byte*>(a.mutable_data()), held_bytes(t)});
      out[py::str(t.name)] = a;
    } else {
      out[py::str(t.name)] = py::array{py::dtype{numpy_format(t.type)}, shape,
                                       received.data(), base};
    }
    offset += t.byte_size;
  }
  return out;
}

py::list client_handle::task::layout() const {
  py::list out;
  if (!info.model)
    return out;
  for (const auto& t : info.model->layout.tensors) // as the model holds them
    out.append(py::make_tuple(t.name, dtype_label(t.held.value_or(t.type)),
                              py::tuple(py::cast(t.shape))));
  return out;
}

client_handle::pinned_update
client_handle::pin_update(const task_info& info, const py::list& tensors) {
  const auto& layout = info.model->layout;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < layout.tensors.size(); ++i)
    index[layout.tensors[i].name] = i;
  std::vector<py::buffer_info> pins(layout.tensors.size());
  std::vector<bool> given(layout.tensors.size(), false);
  std::vector<std::vector<std::byte>> widened;
  widened.reserve(layout.tensors.size()); // views point into its elements
  model_view view;
  view.tensors.resize(layout.tensors.size());
  auto bad = [](const std::string& why) {
    raise({errc::bad_argument, "task.send: " + why});
  };
  for (auto item : tensors) {
    auto entry = item.cast<py::tuple>();
    auto name = entry[0].cast<std::string>();
    auto it = index.find(name);
    if (it == index.end())
      bad("tensor '" + name + "' is not in the server's model");
    const auto& t = layout.tensors[it->second];
    auto type = dtype_named(entry[2].cast<std::string>());
    if (!type)
      raise(type.err());
    auto held = t.held.value_or(t.type);
    if (*type != held && *type != t.type)
      raise({errc::manifest_mismatch,
             "task.send: tensor '" + name + "' is " + dtype_label(*type) +
                 ", the server's model has " + dtype_label(held)});
    auto buf = entry[1].cast<py::buffer>();
    py::buffer_info b;
    try {
      b = buf.request(writable_update_.load());
    } catch (const py::error_already_set&) {
      bad("tensor '" + name +
          "' is read-only, and DP-FedAvg clips the update in place");
    }
    std::vector<uint64_t> shape(b.shape.begin(), b.shape.end());
    if (shape != t.shape)
      raise({errc::manifest_mismatch, "task.send: tensor '" + name +
                                          "' has shape " + shape_string(shape) +
                                          ", the server's model has " +
                                          shape_string(t.shape)});
    auto bytes = static_cast<uint64_t>(b.size) * b.itemsize;
    auto expected = *type == t.type ? t.byte_size : held_bytes(t);
    if (b.itemsize != static_cast<py::ssize_t>(dtype_bytes(*type)) ||
        bytes != expected)
      bad("tensor '" + name + "' has elements of " +
          std::to_string(b.itemsize) + " bytes");
    auto stride = b.itemsize;
    for (auto d = b.ndim; d-- > 0;) {
      if (b.shape[d] > 1 && b.strides[d] != stride)
        bad("tensor '" + name + "' is not contiguous (use .contiguous())");
      stride *= b.shape[d];
    }
    view.tensors[it->second] = {static_cast<std::byte*>(b.ptr), bytes};
    if (*type != t.type) { // integer or bool: it travels widened
      auto& w = widened.emplace_back(t.byte_size);
      if (auto ok = widen(t, {static_cast<const std::byte*>(b.ptr), bytes}, w);
          !ok)
        raise({ok.err().code, "task.send: " + ok.err().message});
      view.tensors[it->second] = {w.data(), w.size()};
    }
    given[it->second] = true;
    pins[it->second] = std::move(b);
  }
  for (size_t i = 0; i < given.size(); ++i)
    if (!given[i])
      bad("tensor '" + layout.tensors[i].name +
          "' of the server's model is missing from the update");
  return {std::move(view), std::move(pins), std::move(widened)};
}

void client_handle::task::send(const py::list& tensors, uint64_t samples,
                               const figures& train_figures) {
  if (auto ok = msg::check_named_values(train_figures, "task.send metrics");
      !ok)
    raise({errc::bad_argument, ok.err().message});
  if (!info.model || info.evaluate_only)
    raise({errc::bad_argument,
           "task.send: the final model is only to be evaluated "
           "(task.evaluate_only); call task.evaluate(...)"});
  auto update = owner->pin_update(info, tensors);
  if (auto ok = owner->bridge_->send(info.id, std::move(update.view), samples,
                                     train_figures);
      !ok)
    raise(ok.err()); // the update sent before (if any) stays pinned
  owner->pins_ = std::move(update.pins);
  owner->widened_ = std::move(update.widened);
  for (;;) { // until the server has the whole update
    py_task_bridge::wait_result r;
    {
      py::gil_scoped_release unlocked;
      r = owner->bridge_->wait_uploaded(info.id, signal_slice);
    }
    if (r == py_task_bridge::wait_result::ready)
      return;
    if (r == py_task_bridge::wait_result::ended) {
      owner->finished();
      return;
    }
    owner->check_signals();
  }
}

void client_handle::task::evaluate(uint64_t samples,
                                   const figures& eval_figures) {
  if (auto ok = msg::check_named_values(eval_figures, "task.evaluate metrics");
      !ok)
    raise({errc::bad_argument, ok.err().message});
  if (samples > msg::max_evaluation_samples)
    raise({errc::bad_argument, "task.evaluate: num_samples is too large"});
  if (!info.evaluate_only) { // of this task's model, whatever came since
    if (evaluated)
      raise({errc::bad_argument, "task.evaluate: round " +
                                     std::to_string(info.round) +
                                     "'s model was evaluated already"});
    evaluated = true;
    owner->send_evaluation(
        msg::evaluation{info.round - 1, samples, eval_figures});
    return;
  }
  eval_metrics m;
  m.samples = samples;
  m.figures = eval_figures;
  if (auto ok = owner->bridge_->evaluated(info.id, m); !ok)
    raise(ok.err());
}

} // namespace fedcaf::py_client

PYBIND11_MODULE(_fedcaf, m) {
  using fedcaf::py_client::client_handle;
  m.doc() = "fedcaf's C++ client, embedded (use the fedcaf package)";
  static py::exception<void> error_type(m, "Error");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const fedcaf::py_client::raised& e) {
      PyErr_SetObject(error_type.ptr(),
                      py::make_tuple(e.code, e.message).ptr());
    }
  });
  py::class_<client_handle::task>(m, "Task")
      .def_property_readonly(
          "round", [](const client_handle::task& t) { return t.info.round; })
      .def_property_readonly(
          "evaluate_only",
          [](const client_handle::task& t) { return t.info.evaluate_only; })
      .def_property_readonly("proximal_mu",
                             [](const client_handle::task& t) {
                               return t.owner->proximal_mu_.load();
                             })
      .def_property_readonly(
          "cancelled",
          [](const client_handle::task& t) { return t.owner->cancelled(); })
      .def("arrays", &client_handle::task::arrays)
      .def("layout", &client_handle::task::layout)
      .def("send", &client_handle::task::send)
      .def("evaluate", &client_handle::task::evaluate);
  py::class_<client_handle>(m, "Client")
      .def(py::init<const std::string&, const std::vector<std::string>&>())
      .def("next_task", &client_handle::next_task)
      .def("close", &client_handle::close)
      .def("leave", &client_handle::leave)
      .def("ended", &client_handle::ended)
      .def("report_json", &client_handle::report_json);
}
