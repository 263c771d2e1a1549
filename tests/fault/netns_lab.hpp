// The fault suite's network for partitions: one network namespace per worker, joined to the root
// namespace by a veth pair whose root ends are ports of one bridge, and an nftables table that
// can cut one worker off.
//
//   root namespace                              namespace dlock-fault-<pid>-<i>
//   bridge dlf<pid>b 10.213.X.1/24  <- veth ->  dlf<pid>n<i> 10.213.X.(i+2)/24
//   (the lock and resource servers, the
//    delay proxy listen on 10.213.X.1 too)
//
// The table `inet dlock_fault_<pid>` holds a set `cut` of worker addresses and two chains that
// drop every packet from (hook input) and to (hook output) an address in the set. A partition
// adds the worker's address to the set with a timeout, so that even a suite killed by SIGKILL
// leaves no partition behind for longer than that; the heal deletes it. Everything is named after
// the suite's process id; a new lab first removes what dead suites left (netns, bridge, table).
//
// A second set, `stream`, of (source port . destination port) pairs drops TCP segments between
// two local ports (hook output, which loopback traffic passes): the suite cuts a master's
// replication stream to its replica with it, so that what the master acknowledges next never
// reaches the replica.
//
// Everything runs the `ip` and `nft` commands (iproute2, nftables), as root. make() says why it
// cannot build the lab instead of throwing, so that the suite skips only the partition fault.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dlock::fault {

class netns_lab {
 public:
  // Builds the lab for `workers` namespaces. On failure returns nullptr and sets `why` (the
  // command that failed and what it said); nothing is left behind.
  static std::unique_ptr<netns_lab> make(int workers, std::string& why);

  // Removes namespaces, bridge and table. Never throws.
  ~netns_lab();
  netns_lab(const netns_lab&) = delete;
  netns_lab& operator=(const netns_lab&) = delete;

  // The address the servers listen on, reachable from every namespace (the bridge's).
  const std::string& server_address() const { return server_address_; }
  // The bind list for redis-server: loopback and the bridge address.
  std::vector<std::string> redis_bind_args() const;
  // /var/run/netns/<name> of worker i, for setns() in the worker.
  std::string netns_path(int worker) const;
  std::string worker_address(int worker) const;
  std::string describe() const;

  // Drops every packet between worker i and the root namespace (so between it and every server)
  // until heal(i), and at most for `safety` (the set element's timeout). Throws std::runtime_error
  // when nft fails.
  void cut(int worker, std::chrono::milliseconds safety);
  void heal(int worker);

  // Drops every TCP segment from local port `from` to local port `to` (one direction of one
  // loopback connection: a master's port and its replica's end of the replication link) until
  // heal_stream(), at most for `safety`. Throws std::runtime_error when nft fails.
  void cut_stream(std::uint16_t from, std::uint16_t to, std::chrono::milliseconds safety);
  void heal_stream(std::uint16_t from, std::uint16_t to);

  // Removes everything (also called by the destructor). Thread-safe, idempotent.
  void remove() noexcept;

  // Removes what suites no longer running left behind. Never throws.
  static void remove_stale() noexcept;

 private:
  netns_lab() = default;
  void build(int workers);
  void probe();

  int pid_ = 0;
  int workers_ = 0;
  int subnet_ = 0;  // X of 10.213.X.0/24
  std::string server_address_;
  std::string table_;
  std::string bridge_;
  std::vector<std::string> namespaces_;
  std::mutex mutex_;
  bool removed_ = false;
};

}  // namespace dlock::fault
