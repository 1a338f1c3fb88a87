#pragma once
// One round of a client's work, without transport: the round announced,
// its chunk plan, the download into the client's model, training and the
// offer (after the SecAgg+ steps in such rounds), the upload of the update,
// each step recorded in the client's report. It ties the client_model, the
// download_stream, the upload_stream (masked through the client_secagg_flow
// in SecAgg+ rounds) and the client_reporter together. Its stages:
//   downloading (training, SecAgg+ steps) -> offering -> uploading
//   -> closing -> over
// where the server may let the client sit out at the offer or a SecAgg+
// step (-> over), and a round that only evaluates ends at the download.
// Each server answer comes back to on_reply and is answered with a step:
// what the client actor sends next, to which atom, and what its transfer
// watchdog learns. It sends nothing and reads no clock: the client actor
// sends what it returns and passes the time in.
// Thread-safety: none; owned by the client actor.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/codec.hpp"
#include "protocol/client_model.hpp"
#include "protocol/client_reporter.hpp"
#include "protocol/client_secagg_flow.hpp"
#include "protocol/download_stream.hpp"
#include "protocol/upload_stream.hpp"

namespace fedcaf {

class client_round {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// Where the round stands. `downloading` lasts through training and the
  /// SecAgg+ steps; `over` once the upload closed, the client sat out, or
  /// the final model was evaluated.
  enum class stage { downloading, offering, uploading, closing, over };

  /// Which of the server's handlers a request goes to (the atom it is sent
  /// with).
  enum class request_kind { fetch, secagg, offer, credit, chunk, end };

  /// One request for the client actor to send to the server; its answer
  /// comes back to on_reply(to, seq, ...).
  struct request {
    request_kind to;
    msg::frame frame;
    const char* what = ""; ///< names it when the request fails
    uint64_t seq = 0;      ///< a fetch: the chunk it asks for
  };

  /// What a step tells the client's transfer_watchdog.
  enum class transfer { unchanged, started, moved, ended };

  /// What the client actor does after an event, in this order.
  struct step {
    /// Answers to the requests sent before are void from now on (a new
    /// round, the update sent again, or the server forgot the uploads).
    bool stale = false;
    transfer watch = transfer::unchanged;
    /// An evaluation to send (fit_to_send checked it).
    std::optional<msg::evaluation> evaluation{};
    /// The requests to send, in order.
    std::vector<request> requests{};
    /// The model has arrived and its evaluation is sent: call
    /// train_and_offer next.
    bool train = false;
    /// The upload is over (closed, or the client sits out): a task that
    /// waited for it starts now.
    bool upload_over = false;
  };

  /// What a client does with a round announced.
  enum class answer {
    start,      ///< start it (client_round::start, then begin)
    wait,       ///< start it once this round's upload is over
    send_again, ///< this round collects again: send_again
    ignore,     ///< this round's model announced again: under way
  };

  /// Returns what to do with `rs`, announced while `current` is the
  /// client's round (if any) and, iff `reconnecting`, the client registers
  /// again: a new task waits while the current round's upload is open (the
  /// AsyncScheduler's next task may overtake the answer that closes it); a
  /// resend of the current model sends the update again unless it is still
  /// downloading. While reconnecting no upload counts as open, and a resend
  /// sends again whatever the stage.
  static answer answer_announcement(const std::optional<client_round>& current,
                                    const msg::round_start& rs,
                                    bool reconnecting);

  /// Starts round `rs` at `now` on `model`, recorded in `report` (which
  /// also gets the server's evaluation of the previous model); SecAgg+
  /// rounds go through `secagg`, which masks their uploads. Returns an
  /// error iff the model cannot take the round (client_model::begin_round,
  /// prepare_encoder). REQUIRES: the three outlive the round.
  static result<client_round> start(const msg::round_start& rs,
                                    client_model& model,
                                    client_reporter& report,
                                    client_secagg_flow& secagg, time_point now);

  /// The first step of a started round: the first fetches (earlier
  /// answers stale, the transfer started).
  step begin();

  /// Takes the server's answer `f` to request `to` (a fetch: of chunk
  /// `seq`) at `now` (`unix_s` on the wall clock). Returns the next step,
  /// or an error iff the answer is refused (on_chunk, the SecAgg+ flow, the
  /// upload stream, a malformed stream_closed) or training or evaluation
  /// failed.
  result<step> on_reply(request_kind to, uint64_t seq, const msg::frame& f,
                        time_point now, double unix_s);

  /// The model has arrived (step::train) at `now`: trains and offers the
  /// update, through the SecAgg+ steps first in such rounds. Returns the
  /// step, or an error iff training failed.
  result<step> train_and_offer(time_point now);

  /// Back on the server after a lost connection: a download fetches again
  /// what was in flight (counted as resent), an open upload offers again
  /// (the server answers where its stream stands); otherwise nothing.
  step resume();

  /// The server collects the round's updates again: the update is offered
  /// once more (what went already counted as resent). Logs it.
  step send_again();

  /// More of the update is ready (relay_hooks::ready_bytes, a streaming
  /// relay's sum): an upload under way sends what credit allows; or a
  /// download paced by its trainer (relay_hooks::may_fetch) may go on.
  result<step> more_ready();

  /// True iff the upload could send but waits for its own update to be
  /// ready, or the download waits for its trainer's room with no fetch
  /// out (not for the server: its silence is then no stalled link).
  bool waits_on_update() const {
    if (stage_ == stage::downloading)
      return paced_ && !download_->in_flight();
    return stage_ == stage::uploading && upload_->can_send() &&
           !upload_->can_send(model_->ready_bytes());
  }

  /// Fetches made again (relay_hooks::on_refetch) for model bytes
  /// [offset, + bytes) of this round's model: each chunk's number and
  /// fetch frame.
  std::vector<std::pair<uint64_t, msg::frame>>
  refetch_requests(uint64_t offset, uint64_t bytes) const;
  /// Takes `f`, the answer to one of them (chunk `seq`), and copies its
  /// bytes that lie in [offset, + out.size()) to `out`. Returns an error
  /// iff the server refused it or it does not decode.
  result<void> refetched(uint64_t seq, const msg::frame& f, uint64_t offset,
                         std::span<std::byte> out);

  /// Returns true iff `e`'s metrics may go to the server; else logs why,
  /// as client `client_id`.
  static bool fit_to_send(const msg::evaluation& e, std::string_view client_id);

  const msg::round_start& announced() const { return announced_; }
  stage current_stage() const { return stage_; }
  /// True iff every chunk of the round's model is in (a relay's download
  /// ends long before its stage leaves downloading: its "training" is its
  /// children's round).
  bool downloaded() const { return download_ && download_->complete(); }
  /// True iff the update is offered, uploading or closing.
  bool upload_open() const {
    return stage_ == stage::offering || stage_ == stage::uploading ||
           stage_ == stage::closing;
  }

private:
  client_round(msg::round_start rs, client_model& model,
               client_reporter& report, client_secagg_flow& secagg);

  /// Returns true iff `rs` announces this round's model again.
  bool same_model(const msg::round_start& rs) const {
    return rs.round == announced_.round &&
           rs.model_version == announced_.model_version;
  }

  // -- download ---------------------------------------------------------------

  /// Takes `f`, the answer to the fetch of chunk `seq`, into the model.
  /// Returns true iff the whole model has arrived, or an error iff the
  /// chunk is refused (download_stream::receive, ack).
  result<bool> on_chunk(uint64_t seq, const msg::frame& f);

  /// After a lost connection: the fetches in flight go again (counted as
  /// resent).
  void fetch_again();

  // -- training ---------------------------------------------------------------

  /// The model has arrived at `now`: federated evaluation of it. Returns
  /// the evaluation to send, if any, or an error iff evaluation failed.
  result<std::optional<msg::evaluation>> evaluate_received(time_point now);

  /// Trains; training ends at `now`. Returns the offer of the update, or an
  /// error iff training failed.
  result<msg::offer> train(time_point now);

  // -- upload -----------------------------------------------------------------

  /// The server collects the updates again: the upload starts over and
  /// what went already is counted as resent.
  void upload_again();

  /// Returns the next chunk of the update to send (its memory released,
  /// its bytes and the window's depth counted). REQUIRES: upload_->can_send().
  result<msg::frame> take_chunk();

  /// The server closed the upload at `now` (`unix_s` on the wall clock):
  /// the model and the report learn it.
  void upload_closed(time_point now, double unix_s);

  // -- the steps --------------------------------------------------------------

  result<step> on_fetched(uint64_t seq, const msg::frame& f, time_point now);
  result<step> on_secagg(const msg::frame& f);
  result<step> on_accept(const msg::frame& f);
  result<step> on_credit(const msg::frame& f);
  result<step> on_closed(const msg::frame& f, time_point now, double unix_s);
  /// The run's final model: evaluate it (an evaluation with no figures if
  /// the trainer has no test data, so that the server need not wait).
  result<step> evaluate_final(step s);
  step sit_out(const std::string& reason);
  /// Adds the fetches the window allows to `s`.
  void fetch_more(step& s);
  /// Adds the chunks the window allows to `s`.
  result<void> send_more(step& s);
  void offer(step& s);
  void close(step& s);

  msg::round_start announced_;
  client_model* model_;
  client_reporter* report_;
  client_secagg_flow* secagg_;
  stage stage_ = stage::downloading;
  bool paced_ = false; ///< the trainer held the next fetch back
  msg::offer offer_;   ///< the update, as offered
  std::shared_ptr<const chunk_plan> plan_;
  std::optional<download_stream> download_;
  std::optional<upload_stream> upload_;
};

} // namespace fedcaf
