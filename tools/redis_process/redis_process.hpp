// Starts and stops a private redis-server process for integration tests, benchmarks and demos.
//
// Plain C++20 and POSIX: no dependency on GoogleTest or on the dlock library, so every consumer
// (tests, bench, the CLI demo) can link it. Not installed with dlock.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dlock::tools {

// Configuration of one redis_process. Every field has a usable default: a plain server on a free
// loopback port, no authentication.
struct redis_process_options {
  // Server binary, found through PATH unless it contains a '/'.
  std::string executable = "redis-server";
  // Client binary used by redis_process::cli(), found the same way.
  std::string cli_executable = "redis-cli";
  // Plain TCP port on 127.0.0.1. 0 picks a free port (and, on the first start only, picks another
  // one if a different process takes it before the server binds).
  std::uint16_t port = 0;
  // TLS port when tls is set; 0 picks a free port like `port`.
  std::uint16_t tls_port = 0;
  // requirepass for the default user, if not empty.
  std::string password;
  // ACL users, each the text of a redis.conf `user` line without the word `user`, such as
  // "alice on >secret ~* &* +@all". They are written verbatim to the generated config file, so
  // quoting follows redis.conf rules. A rule for "default" overrides `password`.
  std::vector<std::string> acl_users;
  // Also serve TLS on tls_port(), with a CA and a server certificate (CN 127.0.0.1, SAN
  // IP:127.0.0.1 and DNS:localhost; for client authentication too, because a cluster node
  // presents it on the cluster bus, where Redis demands client certificates) made at
  // construction with the openssl command.
  // Clients are not asked for certificates (tls-auth-clients no).
  bool tls = false;
  // With tls: a directory holding an existing CA (ca.crt and ca.key, such as another
  // redis_process's dir()) that signs this server's certificate instead of a CA of its own.
  // Servers that talk TLS to each other (a cluster bus, replication) need one CA.
  std::string tls_ca_dir;
  // Also listen on a unix socket in the temporary directory (unixsocketperm 700).
  bool unix_socket = false;
  // More redis-server arguments, appended last so they override the generated ones,
  // e.g. {"--maxclients", "100"}.
  std::vector<std::string> extra_args;
  // How long start() waits for the server to answer before killing it and throwing.
  std::chrono::milliseconds start_timeout{10000};
  // How long stop() waits after SIGTERM before sending SIGKILL.
  std::chrono::milliseconds stop_timeout{5000};
  // Linux: the server gets SIGKILL when the thread that started it exits, so a crashed test
  // binary leaves no server behind. Turn off when a short-lived thread starts a server that must
  // outlive it.
  bool die_with_parent = true;
  // The server starts a session of its own (setsid), as a server run as a service does, instead
  // of staying in its parent's. Where the kernel groups tasks for CPU time by session
  // (sched_autogroup, on by default in Debian's kernels), a server left in a benchmark's session
  // shares one group with the clients it serves and runs on their fair share; on this project's
  // 2-vCPU machines that made the same client take 2x the CPU per acquisition
  // (docs/benchmarks.md, session 19). The benchmarks set it; the tests keep their servers
  // beside them.
  bool own_session = false;
};

// The defaults, in a session of its own: a server as the benchmarks start it, run like a service.
inline redis_process_options service_options() {
  redis_process_options options;
  options.own_session = true;
  return options;
}

// One redis-server child process with its own temporary directory (config, log, certificates,
// unix socket).
//
// Not thread-safe: use one object from one thread at a time. The accessors that only read the
// configuration (port(), url(), dir(), ...) may be called concurrently once construction is done.
class redis_process {
 public:
  // Makes a temporary directory (mkdtemp under $TMPDIR, or /tmp), writes the config, makes the
  // TLS files if asked, starts the server and waits until it answers on port().
  // Throws std::invalid_argument for unusable options (an ACL rule with a line break) and
  // std::runtime_error when the server cannot be started or is not ready within start_timeout;
  // the message includes the last lines of the server log. On failure nothing is left running
  // and the temporary directory is removed.
  explicit redis_process(redis_process_options options = {});

  // Stops the server (SIGTERM, SIGKILL after stop_timeout), reaps it and removes the temporary
  // directory unless keep_files(true) was called. Never throws.
  virtual ~redis_process();

  redis_process(const redis_process&) = delete;
  redis_process& operator=(const redis_process&) = delete;
  redis_process(redis_process&&) = delete;
  redis_process& operator=(redis_process&&) = delete;

  // Plain TCP port on 127.0.0.1; always served, also with tls. Stays the same across restarts.
  std::uint16_t port() const { return port_; }
  // TLS port on 127.0.0.1; 0 unless options.tls.
  std::uint16_t tls_port() const { return tls_port_; }
  // "redis://127.0.0.1:<port>", or "redis://:<password>@127.0.0.1:<port>" when a password is set
  // (percent-encoded outside RFC 3986 unreserved characters).
  std::string url() const;
  // "rediss://127.0.0.1:<tls_port>" (with the password like url()); empty unless options.tls.
  std::string tls_url() const;
  // Unix socket path; empty unless options.unix_socket.
  std::string unix_path() const;
  // CA certificate that verifies the server certificate; empty unless options.tls.
  std::string ca_file() const;
  // Server certificate and private key; empty unless options.tls.
  std::string tls_cert_file() const;
  std::string tls_key_file() const;
  // The temporary directory, and the server log and generated config file inside it.
  std::string dir() const { return dir_; }
  std::string log_file() const;
  std::string config_file() const;
  // The options this server was made with (ports as given, not as picked).
  const redis_process_options& options() const { return options_; }

  // Process id of the running server, or -1 when it is not running. Reaps a server that has
  // exited on its own.
  pid_t pid() const;
  // True while the server process exists (also while stopped by SIGSTOP). Reaps a server that
  // has exited on its own.
  bool running() const;

  // Sends `signal` to the server; does nothing when it is not running.
  // SIGKILL: waits for the process and reaps it, so pid() is -1 afterwards.
  // SIGTERM: same as stop().
  // Any other signal (SIGSTOP, SIGCONT, ...) is only sent.
  void kill(int signal = SIGKILL);
  // Graceful stop: SIGTERM (plus SIGCONT in case it is stopped), waits up to stop_timeout, then
  // SIGKILL; reaps. Does nothing when not running.
  void stop() noexcept;
  // Waits up to `timeout` for the server to end on its own (SHUTDOWN, a crash, a signal sent with
  // kill()) and reaps it. Returns true if it is not running (at once if it was not), false if it
  // still runs at the timeout.
  bool wait_exit(std::chrono::milliseconds timeout);
  // Starts the server again with the same configuration on the same ports (stopping it first if it
  // is running) and waits for readiness. Data is not kept (no persistence). While another process
  // holds one of the ports, retries until start_timeout. Throws std::runtime_error like the
  // constructor, e.g. when the port stays taken.
  void start();

  // true: the destructor leaves the temporary directory (log, config, certificates) in place.
  void keep_files(bool keep) { keep_files_ = keep; }

  // Runs `redis-cli -e -h 127.0.0.1 -p <port> [-a <password>] <args...>` and returns its stdout
  // without the final newline (raw output: one line per reply element).
  // Throws std::runtime_error when redis-cli cannot run, exits non-zero (connection failure or an
  // error reply) or does not finish within `timeout` (10 s by default).
  std::string cli(const std::vector<std::string>& args) const;
  std::string cli(const std::vector<std::string>& args, std::chrono::milliseconds timeout) const;

  // The last `lines` lines of the server log (fewer if the log is shorter), "" if it is missing.
  std::string log_tail(std::size_t lines = 20) const;

 private:
  enum class launch_result { ready, port_in_use };

  void choose_ports();
  void write_config() const;
  void make_tls_files() const;
  std::vector<std::string> server_args() const;
  launch_result launch(bool may_retry_port);
  bool reap_if_exited() const;
  std::string describe_failure(const std::string& what, std::uintmax_t log_offset,
                               std::uintmax_t stdout_offset) const;
  std::string password_userinfo() const;
  void remove_dir() noexcept;

  redis_process_options options_;
  std::string dir_;
  std::uint16_t port_ = 0;
  std::uint16_t tls_port_ = 0;
  // Mutable so that const observers can reap a server that exited on its own.
  mutable pid_t pid_ = -1;
  mutable int last_status_ = -1;  // wait status of the last process reaped by reap_if_exited()
  bool keep_files_ = false;
};

// Outcome of run_command().
struct command_result {
  int exit_code = -1;      // exit status; 128 + signal if killed by a signal; -1 if timed out
  bool timed_out = false;  // true if the command was killed after the timeout
  std::string out;         // everything written to stdout
  std::string err;         // everything written to stderr
};

// Runs argv[0] (found through PATH unless it contains a '/') with arguments argv[1..], stdin from
// /dev/null, and collects stdout and stderr. Kills it with SIGKILL after `timeout`.
// Throws std::invalid_argument for an empty argv and std::runtime_error when the program cannot be
// executed (not found, not executable).
command_result run_command(const std::vector<std::string>& argv,
                           std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Binds 127.0.0.1:0, reads the port the kernel chose, closes the socket and returns the port.
// Another process may take it before the caller binds it. Throws std::runtime_error on failure.
std::uint16_t find_free_port();

}  // namespace dlock::tools
