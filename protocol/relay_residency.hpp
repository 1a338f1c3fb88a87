#pragma once
// Which bytes of a window-mode relay's model are resident, position by
// position of its children's chunk plan, so that the relay holds its
// download cache, a window of settled sums and the positions its checks
// use, not the model (see docs/design.md, "Trees of aggregators").
//
// The memory is one anonymous mapping (byte_buffer::anonymous) of the
// model's size; a position's bytes are in it while something needs them:
//   - the download cache: positions [served, served + 2 cache) hold the
//     parent's model g as the relay's download writes it, until every
//     child of the round fetched them (served_below: the server keeps a
//     window below the slowest); the download may write only there
//     (may_download);
//   - `check`: g at a position a child's update is checked and summed
//     against (the aggregator), or a fetch of a position already gone
//     from the cache is served from (the server): held, and fetched
//     again from the parent (the asker) where it is gone;
//   - `sum`: the position's settled sum, until it went up; then it is
//     kept in an unlinked spill file, read back only if the parent has it
//     sent again (restore_sums).
// A page is given back once no position in it is needed.
// Thread-safety: safe (a mutex); the bytes of a position held are written
// only by its holder, or by fill() while nobody holds them resident.

#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <vector>

#include "fedcaf/byte_buffer.hpp"
#include "fedcaf/chunk_plan.hpp"

namespace fedcaf {

class relay_residency {
public:
  enum need : uint8_t { check = 1, serve = 2, sum = 4 };

  /// `memory`: (a share of) the model's memory, an anonymous mapping of
  /// plan.total_bytes(); `cache`: the children's window of fetches (>= 1):
  /// the download cache holds a window below the slowest child still
  /// fetching (a child that reconnects fetches its window again) and a
  /// window above it.
  relay_residency(byte_buffer memory, chunk_plan plan, uint32_t cache);

  const chunk_plan& plan() const { return plan_; }
  uint32_t cache() const { return cache_; }

  /// How the relay fetches bytes [offset, offset + bytes) of its parent's
  /// model again (its upstream client); they come back by fill().
  void set_asker(std::function<void(uint64_t, uint64_t)> ask);
  /// Called with a position once fill() made it resident (several: the
  /// aggregator's and the server's).
  void add_waker(std::function<void(uint64_t)> wake);
  /// Called when the download may write further (served_below moved).
  void set_download_waker(std::function<void()> wake);
  /// Called when a settled sum went up (may_settle() may hold again).
  void set_sum_waker(std::function<void()> wake);

  // -- the download cache ----------------------------------------------------

  /// May the relay's download fetch bytes [offset, offset + bytes) of its
  /// parent's model now? True iff they start before the cache's end (the
  /// bytes past it join the cache).
  bool may_download(uint64_t offset, uint64_t bytes);
  /// Every child of the round fetched the positions below `seq`
  /// (monotone): they leave the cache.
  void served_below(uint64_t seq);
  /// The aggregator measured g's norm over the positions below `seq`
  /// (monotone): none leaves the cache before it is measured.
  void measured_below(uint64_t seq);
  uint64_t served() const;
  /// The download wrote every byte of the model (the relay's train()
  /// begins): positions asked for while in the cache are in, and their
  /// wakers hear so.
  void download_complete();

  // -- positions held --------------------------------------------------------

  /// Holds position `seq` for `why`; returns true iff its bytes are
  /// resident (in the cache once downloaded, or filled, and not given back
  /// since); else asks for them once (the asker) and each waker hears
  /// when fill() brings them.
  bool want(uint64_t seq, need why);
  /// True iff want(seq, ...) now would ask the parent for it (not
  /// resident, not asked for already, the round not given up).
  bool would_ask(uint64_t seq) const;
  /// Holds position `seq` for `why` without asking for it: the download
  /// brings it, and it stays when it leaves the cache (a relay's first
  /// positions, checked before its upstream client can fetch again).
  void pin(uint64_t seq, need why);
  /// Lets go of `why` at `seq`; its pages go back where nothing needs them.
  void release(uint64_t seq, need why);
  /// Bytes of the parent's model fetched again: written at the positions
  /// that wait for them, which become resident. Returns the positions made
  /// resident. An empty span: they could not be (the parent's round is
  /// over, or the relay left it): the round is given up (abandoned()), and
  /// every waker hears each position that waited.
  std::vector<uint64_t> fill(uint64_t offset, std::span<const std::byte> bytes);

  // -- sums ------------------------------------------------------------------

  /// Position `seq` is about to hold its settled sum (written by the
  /// caller after this).
  void hold_sum(uint64_t seq);
  /// True iff fewer than `cache` settled sums wait to go up, or they hold
  /// less than one of the parent's chunks (upstream_chunk) and two of the
  /// children's: the upload waits for every position a parent chunk
  /// touches, and one before it may still be going up.
  bool may_settle() const;
  /// The relay's upload goes up in chunks of up to `bytes` (its parent's
  /// plan: the largest chunk its download fetched).
  void upstream_chunk(uint64_t bytes);
  /// Bytes [offset, offset + bytes) of the sums went up: each position
  /// they end is kept in the spill file and given back.
  void sent(uint64_t offset, uint64_t bytes);
  /// Bytes [offset, offset + bytes) of the sums are to go up again: the
  /// positions they touch that were given back are read back from the
  /// spill file. Returns an error iff one could not be.
  result<void> restore_sums(uint64_t offset, uint64_t bytes);

  /// The round is given up (the relay's upstream round is over): as when
  /// the parent's model cannot be fetched again. Wakes whoever waits.
  void abandon();

  /// True iff the parent's model could not be fetched again: this round's
  /// sum goes nowhere. want() then says yes (the bytes are what is left:
  /// zeroes where given back), and sums are not kept (may_settle holds).
  bool abandoned() const;

  /// Positions held for each need, and pages given back so far (tests,
  /// logs).
  uint64_t held(need why) const;
  uint64_t pages_given_back() const;

private:
  struct position {
    uint8_t needs = 0;
    bool resident = false; ///< filled (or settled) and not given back
    bool asked = false;    ///< fetched again, not yet filled
    bool spilled = false;  ///< its sum is in the spill file
  };
  bool in_cache(uint64_t seq) const;
  /// Positions below min(requested, measured) leave the cache (each the
  /// largest given so far).
  void advance(uint64_t requested, uint64_t measured);
  bool held_locked(uint64_t seq) const;
  /// Gives back the pages of position `seq` that no held position shares.
  void give_back(uint64_t seq);
  /// Positions whose bytes touch [offset, offset + bytes).
  std::pair<uint64_t, uint64_t> touching(uint64_t offset, uint64_t bytes) const;

  mutable std::mutex mutex_;
  byte_buffer memory_;
  chunk_plan plan_;
  uint32_t cache_;
  std::vector<position> positions_;
  uint64_t served_ = 0;
  uint64_t requested_ = 0; ///< served_below's
  uint64_t measured_ = 0;  ///< measured_below's
  uint64_t granted_ = 0;   ///< the download may have written below it
  bool downloaded_ = false;
  bool abandoned_ = false;
  uint32_t sums_ = 0;      ///< positions holding a sum not yet sent
  uint64_t sum_bytes_ = 0; ///< their bytes
  uint64_t upstream_chunk_ = 0;
  uint64_t given_back_ = 0;
  spill_file spill_;
  std::function<void(uint64_t, uint64_t)> ask_;
  std::vector<std::function<void(uint64_t)>> wakers_;
  std::function<void()> download_waker_;
  std::function<void()> sum_waker_;
};

} // namespace fedcaf
