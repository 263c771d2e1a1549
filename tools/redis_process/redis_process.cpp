#include "redis_process.hpp"

#include "unique_fd.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

namespace dlock::tools {
namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::string_view error_prefix = "dlock::tools::redis_process: ";
constexpr std::size_t failure_log_lines = 20;

[[noreturn]] void throw_errno(const std::string& what) {
  const int saved = errno;
  throw std::runtime_error(std::string(error_prefix) + what + ": " + std::strerror(saved));
}

std::pair<unique_fd, unique_fd> make_pipe() {
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) throw_errno("pipe2");
  return {unique_fd(fds[0]), unique_fd(fds[1])};
}

unique_fd open_dev_null() {
  unique_fd fd(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!fd.valid()) throw_errno("open /dev/null");
  return fd;
}

// Milliseconds left until `deadline`, rounded up so that a poll() never wakes early, clamped to
// what poll() accepts. 0 once the deadline has passed.
int remaining_ms(clock_type::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock_type::now());
  if (left.count() <= 0) return 0;
  return static_cast<int>(std::min<std::chrono::milliseconds::rep>(left.count(), INT_MAX));
}

std::string exit_description(int status) {
  if (status < 0) return "exited (status unknown: already reaped)";
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

// ---------------------------------------------------------------------------------------------
// Child processes

// `name` itself if it contains a '/', otherwise the first executable regular file called `name` in
// $PATH. Throws std::runtime_error if there is none.
std::string resolve_executable(const std::string& name) {
  if (name.empty()) throw std::invalid_argument(std::string(error_prefix) + "empty program name");
  if (name.find('/') != std::string::npos) return name;
  const char* env_path = std::getenv("PATH");
  const std::string path_list = env_path != nullptr ? env_path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t begin = 0;
  while (begin <= path_list.size()) {
    std::size_t end = path_list.find(':', begin);
    if (end == std::string::npos) end = path_list.size();
    // An empty PATH entry means the current directory.
    std::string candidate = end == begin ? "." : path_list.substr(begin, end - begin);
    candidate.append("/").append(name);
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    begin = end + 1;
  }
  throw std::runtime_error(std::string(error_prefix) + "cannot execute '" + name +
                           "': not found in PATH");
}

// In the child between fork and exec: only async-signal-safe calls from here on.
// Makes `fd` the descriptor `target`, with close-on-exec cleared.
bool redirect_fd(int fd, int target) {
  if (fd == target) return ::fcntl(target, F_SETFD, 0) == 0;
  return ::dup2(fd, target) == target;
}

[[noreturn]] void report_and_exit(int exec_error_fd) {
  const int error = errno;
  ssize_t written = 0;
  do {
    written = ::write(exec_error_fd, &error, sizeof error);
  } while (written < 0 && errno == EINTR);
  ::_exit(127);
}

struct child_setup {
  const char* path = nullptr;
  char* const* argv = nullptr;
  std::array<int, 3> stdio{-1, -1, -1};
  int exec_error_fd = -1;
  bool die_with_parent = false;
  bool new_session = false;
  pid_t parent = -1;
  int max_fd = 0;
};

[[noreturn]] void exec_child(const child_setup& setup) {
#ifdef __linux__
  if (setup.die_with_parent) {
    // The parent may have died between fork() and prctl(); then nobody would kill us later.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != setup.parent) ::_exit(127);
  }
#endif
  if (setup.new_session && ::setsid() < 0) report_and_exit(setup.exec_error_fd);
  std::array<int, 3> stdio = setup.stdio;
  // Move sources out of 0..2 first so one dup2() cannot overwrite another source.
  for (int& fd : stdio) {
    if (fd < 3) fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) report_and_exit(setup.exec_error_fd);
  }
  for (int target = 0; target < 3; ++target) {
    if (!redirect_fd(stdio[static_cast<std::size_t>(target)], target)) {
      report_and_exit(setup.exec_error_fd);
    }
  }
  // Signal mask and ignored signals survive exec; the programs we run expect defaults.
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  ::sigemptyset(&default_action.sa_mask);
  for (const int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    ::sigaction(sig, &default_action, nullptr);
  }
  // Whatever else the parent has open (sockets of other tests, pipes of other children) must not
  // leak into the child. Marking close-on-exec keeps exec_error_fd usable until execv().
#ifdef CLOSE_RANGE_CLOEXEC
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
#endif
  {
    for (int fd = 3; fd < setup.max_fd; ++fd)
      ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  ::execv(setup.path, setup.argv);
  report_and_exit(setup.exec_error_fd);
}

// Starts argv[0] (resolved through PATH) with the given stdin, stdout and stderr descriptors.
// Returns the child's pid once exec() succeeded; throws std::runtime_error if it failed.
pid_t spawn(const std::vector<std::string>& argv, int stdin_fd, int stdout_fd, int stderr_fd,
            bool die_with_parent, bool new_session = false) {
  if (argv.empty()) throw std::invalid_argument(std::string(error_prefix) + "empty argv");
  const std::string path = resolve_executable(argv.front());
  std::vector<char*> c_argv;
  c_argv.reserve(argv.size() + 1);
  for (const std::string& arg : argv)
    c_argv.push_back(const_cast<char*>(arg.c_str()));
  c_argv.push_back(nullptr);

  // The child writes errno here if exec() fails; a successful exec() closes it (O_CLOEXEC), so
  // the parent reads either an errno or end-of-file.
  auto [exec_error_read, exec_error_write] = make_pipe();
  const long open_max = ::sysconf(_SC_OPEN_MAX);
  child_setup setup;
  setup.path = path.c_str();
  setup.argv = c_argv.data();
  setup.stdio = {stdin_fd, stdout_fd, stderr_fd};
  setup.exec_error_fd = exec_error_write.get();
  setup.die_with_parent = die_with_parent;
  setup.new_session = new_session;
  setup.parent = ::getpid();
  // Only used when close_range() is unavailable; bounded so a huge RLIMIT_NOFILE stays cheap.
  setup.max_fd = static_cast<int>(std::clamp<long>(open_max, 256, 65536));

  const pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork");
  if (pid == 0) exec_child(setup);

  exec_error_write.reset();
  int child_errno = 0;
  ssize_t got = 0;
  do {
    got = ::read(exec_error_read.get(), &child_errno, sizeof child_errno);
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof child_errno)) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    throw std::runtime_error(std::string(error_prefix) + "cannot execute '" + path +
                             "': " + std::strerror(child_errno));
  }
  return pid;
}

// Waits for `pid` to end until `deadline`. Returns its wait status (-1 if it was reaped elsewhere,
// e.g. because SIGCHLD is ignored), or nothing if it is still running at the deadline.
std::optional<int> wait_for_exit(pid_t pid, clock_type::time_point deadline) {
  auto pause = 1ms;
  for (;;) {
    int status = 0;
    const pid_t result = ::waitpid(pid, &status, WNOHANG);
    if (result == pid) return status;
    if (result < 0 && errno == EINTR) continue;
    if (result < 0) return -1;
    const auto now = clock_type::now();
    if (now >= deadline) return std::nullopt;
    // POSIX has no waitpid() with a timeout; poll with a short, growing interval.
    std::this_thread::sleep_for(std::min<clock_type::duration>(pause, deadline - now));
    pause = std::min(pause * 2, 10ms);
  }
}

// Blocks until `pid` has ended and returns its wait status (-1 if reaped elsewhere).
int reap(pid_t pid) {
  int status = 0;
  for (;;) {
    const pid_t result = ::waitpid(pid, &status, 0);
    if (result == pid) return status;
    if (result < 0 && errno == EINTR) continue;
    return -1;
  }
}

// ---------------------------------------------------------------------------------------------
// Files

std::uintmax_t file_size_or_zero(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);
  return ec ? 0 : size;
}

// The content of `path` from byte `offset` on (at most the last 64 KiB), "" if unreadable.
std::string read_from(const std::string& path, std::uintmax_t offset) {
  constexpr std::uintmax_t max_bytes = 64 * 1024;
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  const auto end = static_cast<std::uintmax_t>(std::max<std::streamoff>(in.tellg(), 0));
  const std::uintmax_t begin = std::max(offset, end > max_bytes ? end - max_bytes : 0);
  if (begin >= end) return {};
  in.seekg(static_cast<std::streamoff>(begin));
  std::string content(static_cast<std::size_t>(end - begin), '\0');
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  content.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return content;
}

// The last `lines` lines of `text`, without the final newline.
std::string last_lines(std::string text, std::size_t lines) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
    text.pop_back();
  if (lines == 0) return {};
  std::size_t pos = text.size();
  for (std::size_t found = 0; found < lines; ++found) {
    const std::size_t newline = pos == 0 ? std::string::npos : text.rfind('\n', pos - 1);
    if (newline == std::string::npos) return text;
    pos = newline;
  }
  return text.substr(pos + 1);
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) throw std::runtime_error(std::string(error_prefix) + "cannot write " + path);
}

std::string make_temp_dir(bool needs_unix_socket) {
  const char* env_tmp = std::getenv("TMPDIR");
  // The server changes its working directory to --dir, so every path it gets must be absolute.
  std::error_code ec;
  std::string base = fs::absolute(env_tmp != nullptr && *env_tmp != '\0' ? env_tmp : "/tmp", ec);
  if (ec) base = "/tmp";
  while (base.size() > 1 && base.back() == '/')
    base.pop_back();
  std::string pattern = base + "/dlock-redis-XXXXXX";
  // A unix socket path must fit in sockaddr_un::sun_path; a deep $TMPDIR would make the server
  // fail, so fall back to /tmp.
  if (needs_unix_socket &&
      pattern.size() + std::string_view("/redis.sock").size() >= sizeof(sockaddr_un{}.sun_path)) {
    pattern = "/tmp/dlock-redis-XXXXXX";
  }
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) throw_errno("mkdtemp " + pattern);
  return buffer.data();
}

// A double-quoted redis.conf argument (sdssplitargs syntax).
std::string conf_quote(std::string_view value) {
  std::string quoted = "\"";
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (byte < 0x20 || byte >= 0x7f) {
      std::array<char, 5> hex{};
      std::snprintf(hex.data(), hex.size(), "\\x%02x", byte);
      quoted += hex.data();
    } else {
      quoted += c;
    }
  }
  quoted += '"';
  return quoted;
}

// RFC 3986 percent-encoding of everything but unreserved characters.
std::string percent_encode(std::string_view value) {
  std::string encoded;
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      encoded += c;
    } else {
      std::array<char, 4> hex{};
      std::snprintf(hex.data(), hex.size(), "%%%02X", byte);
      encoded += hex.data();
    }
  }
  return encoded;
}

// ---------------------------------------------------------------------------------------------
// Ports and the readiness probe

sockaddr_in loopback_address(std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

// `count` distinct free loopback ports: all sockets stay bound until every port is known.
std::vector<std::uint16_t> pick_free_ports(std::size_t count) {
  std::vector<unique_fd> sockets;
  std::vector<std::uint16_t> ports;
  for (std::size_t i = 0; i < count; ++i) {
    unique_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) throw_errno("socket");
    sockaddr_in address = loopback_address(0);
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      throw_errno("bind 127.0.0.1:0");
    }
    socklen_t length = sizeof address;
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      throw_errno("getsockname");
    }
    ports.push_back(ntohs(address.sin_port));
    sockets.push_back(std::move(fd));
  }
  return ports;
}

bool wait_ready(int fd, short events, clock_type::time_point deadline) {
  for (;;) {
    pollfd entry{fd, events, 0};
    const int result = ::poll(&entry, 1, remaining_ms(deadline));
    if (result > 0) return true;  // errors and hang-ups show up in the next send/recv
    if (result == 0) return false;
    if (errno != EINTR) return false;
  }
}

// A non-blocking loopback connection for the readiness probe; every call gives up at `deadline`.
class probe_connection {
 public:
  probe_connection(std::uint16_t port, clock_type::time_point deadline) : deadline_(deadline) {
    fd_ = unique_fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd_.valid()) return;
    const sockaddr_in address = loopback_address(port);
    if (::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) {
      connected_ = true;
      return;
    }
    if (errno != EINPROGRESS || !wait_ready(fd_.get(), POLLOUT, deadline_)) return;
    int error = 0;
    socklen_t length = sizeof error;
    connected_ = ::getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
  }

  bool connected() const { return connected_; }

  bool send_all(std::string_view data) {
    while (!data.empty()) {
      // MSG_NOSIGNAL: a server closing the connection must not kill the test binary by SIGPIPE.
      const ssize_t sent = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (sent > 0) {
        data.remove_prefix(static_cast<std::size_t>(sent));
      } else if (sent < 0 && errno == EINTR) {
        continue;
      } else if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!wait_ready(fd_.get(), POLLOUT, deadline_)) return false;
      } else {
        return false;
      }
    }
    return true;
  }

  // One reply line without its CRLF, or nothing on timeout or closed connection.
  std::optional<std::string> read_line() {
    for (;;) {
      const std::size_t end = buffer_.find("\r\n");
      if (end != std::string::npos) {
        std::string line = buffer_.substr(0, end);
        buffer_.erase(0, end + 2);
        return line;
      }
      if (!fill()) return std::nullopt;
    }
  }

  std::optional<std::string> read_exact(std::size_t size) {
    while (buffer_.size() < size) {
      if (!fill()) return std::nullopt;
    }
    std::string data = buffer_.substr(0, size);
    buffer_.erase(0, size);
    return data;
  }

 private:
  bool fill() {
    std::array<char, 4096> chunk{};
    for (;;) {
      const ssize_t got = ::recv(fd_.get(), chunk.data(), chunk.size(), 0);
      if (got > 0) {
        buffer_.append(chunk.data(), static_cast<std::size_t>(got));
        return true;
      }
      if (got == 0) return false;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
      if (!wait_ready(fd_.get(), POLLIN, deadline_)) return false;
    }
  }

  unique_fd fd_;
  clock_type::time_point deadline_;
  bool connected_ = false;
  std::string buffer_;
};

enum class probe_result {
  no_answer,         // nothing listening yet, or not answering usefully
  ready_verified,    // answered, and INFO shows it is our server
  ready_unverified,  // answered, identity not checkable (no permission to run INFO)
  foreign,           // a different server answers on this port
};

// The value of `field` in an INFO reply body, if present.
std::optional<std::string_view> info_field(std::string_view body, std::string_view field) {
  for (std::size_t begin = 0; begin < body.size();) {
    std::size_t end = body.find("\r\n", begin);
    if (end == std::string_view::npos) end = body.size();
    const std::string_view line = body.substr(begin, end - begin);
    if (line.size() > field.size() && line.starts_with(field) && line[field.size()] == ':') {
      return line.substr(field.size() + 1);
    }
    begin = end + 2;
  }
  return std::nullopt;
}

std::string resp_command(const std::vector<std::string_view>& parts) {
  std::string encoded = "*" + std::to_string(parts.size()) + "\r\n";
  for (const std::string_view part : parts) {
    encoded += "$" + std::to_string(part.size()) + "\r\n";
    encoded += part;
    encoded += "\r\n";
  }
  return encoded;
}

// Asks the server on `port` for PING and, where allowed, for INFO server, so that a different
// server that grabbed an automatically picked port is not mistaken for ours. Ours is the one whose
// config_file is `config_file` (unique per temporary directory, and still right when the executable
// is a wrapper that forks), or, if INFO has no config_file, whose process_id is `pid`.
probe_result probe(std::uint16_t port, pid_t pid, const std::string& config_file,
                   const std::string& password, clock_type::time_point deadline) {
  probe_connection connection(port, deadline);
  if (!connection.connected() || !connection.send_all("PING\r\n")) return probe_result::no_answer;
  const std::optional<std::string> pong = connection.read_line();
  if (!pong) return probe_result::no_answer;
  if (pong->starts_with("-NOPERM")) return probe_result::ready_unverified;
  if (pong->starts_with("-NOAUTH")) {
    if (password.empty() || !connection.send_all(resp_command({"AUTH", password}))) {
      return probe_result::ready_unverified;
    }
    const std::optional<std::string> auth = connection.read_line();
    if (!auth) return probe_result::no_answer;
    if (*auth != "+OK") return probe_result::ready_unverified;
  } else if (!pong->starts_with("+PONG")) {
    return probe_result::no_answer;  // e.g. -LOADING or -ERR max number of clients reached
  }
  if (!connection.send_all("INFO server\r\n")) return probe_result::no_answer;
  const std::optional<std::string> header = connection.read_line();
  if (!header) return probe_result::no_answer;
  std::size_t size = 0;
  if (header->size() < 2 || header->front() != '$' ||
      std::from_chars(header->data() + 1, header->data() + header->size(), size).ec !=
          std::errc{}) {
    return probe_result::ready_unverified;  // e.g. INFO renamed away or not permitted
  }
  const std::optional<std::string> body = connection.read_exact(size + 2);
  if (!body) return probe_result::no_answer;
  if (const auto reported_config = info_field(*body, "config_file")) {
    return *reported_config == config_file ? probe_result::ready_verified : probe_result::foreign;
  }
  const auto reported_pid = info_field(*body, "process_id");
  long long value = 0;
  if (!reported_pid ||
      std::from_chars(reported_pid->data(), reported_pid->data() + reported_pid->size(), value)
              .ec != std::errc{}) {
    return probe_result::ready_unverified;
  }
  return value == pid ? probe_result::ready_verified : probe_result::foreign;
}

std::string join(const std::vector<std::string>& parts) {
  std::string joined;
  for (const std::string& part : parts) {
    if (!joined.empty()) joined += ' ';
    joined += part;
  }
  return joined;
}

void run_openssl(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  const command_result result = run_command(argv, 30s);
  if (result.timed_out || result.exit_code != 0) {
    throw std::runtime_error(
        std::string(error_prefix) + "'" + join(argv) + "' failed (" +
        (result.timed_out ? std::string("timed out") : "exit " + std::to_string(result.exit_code)) +
        "): " + last_lines(result.err + result.out, 10));
  }
}

}  // namespace

// -----------------------------------------------------------------------------------------------
// Free functions

command_result run_command(const std::vector<std::string>& argv,
                           std::chrono::milliseconds timeout) {
  if (argv.empty())
    throw std::invalid_argument(std::string(error_prefix) + "run_command: empty argv");
  const auto deadline = clock_type::now() + timeout;
  const unique_fd dev_null = open_dev_null();
  auto [out_read, out_write] = make_pipe();
  auto [err_read, err_write] = make_pipe();
  const pid_t pid = spawn(argv, dev_null.get(), out_write.get(), err_write.get(), true);
  // Only the child may hold the write ends, or end-of-file would never come.
  out_write.reset();
  err_write.reset();

  command_result result;
  std::array<pollfd, 2> entries{pollfd{out_read.get(), POLLIN, 0},
                                pollfd{err_read.get(), POLLIN, 0}};
  std::array<std::string*, 2> sinks{&result.out, &result.err};
  std::array<char, 4096> chunk{};
  // poll() ignores negative descriptors: a stream at end-of-file gets fd -1.
  while (entries[0].fd >= 0 || entries[1].fd >= 0) {
    const int ready = ::poll(entries.data(), entries.size(), remaining_ms(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      result.timed_out = true;
      break;
    }
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (entries[i].fd < 0 || entries[i].revents == 0) continue;
      const ssize_t got = ::read(entries[i].fd, chunk.data(), chunk.size());
      if (got > 0) {
        sinks[i]->append(chunk.data(), static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        entries[i].fd = -1;
      }
    }
  }
  std::optional<int> status;
  if (!result.timed_out) status = wait_for_exit(pid, deadline);
  if (!status) {
    ::kill(pid, SIGKILL);
    reap(pid);
    result.timed_out = true;
    result.exit_code = -1;
    return result;
  }
  if (WIFEXITED(*status)) {
    result.exit_code = WEXITSTATUS(*status);
  } else if (WIFSIGNALED(*status)) {
    result.exit_code = 128 + WTERMSIG(*status);
  }
  return result;
}

std::uint16_t find_free_port() {
  return pick_free_ports(1).front();
}

// -----------------------------------------------------------------------------------------------
// redis_process

redis_process::redis_process(redis_process_options options) : options_(std::move(options)) {
  for (const std::string& rule : options_.acl_users) {
    if (rule.find_first_of("\r\n") != std::string::npos) {
      throw std::invalid_argument(std::string(error_prefix) + "ACL rule contains a line break");
    }
  }
  if (options_.tls && options_.port != 0 && options_.port == options_.tls_port) {
    throw std::invalid_argument(std::string(error_prefix) + "port and tls_port are the same");
  }
  if (options_.start_timeout.count() <= 0) {
    throw std::invalid_argument(std::string(error_prefix) + "start_timeout must be positive");
  }
  dir_ = make_temp_dir(options_.unix_socket);
  try {
    write_config();
    if (options_.tls) make_tls_files();
    // Retrying only helps when we pick the ports; a fixed port that is taken stays taken.
    const bool picks_ports = options_.port == 0 || (options_.tls && options_.tls_port == 0);
    constexpr int max_attempts = 4;
    for (int attempt = 1;; ++attempt) {
      choose_ports();
      if (launch(picks_ports && attempt < max_attempts) == launch_result::ready) break;
    }
  } catch (...) {
    stop();
    remove_dir();
    throw;
  }
}

redis_process::~redis_process() {
  stop();
  if (!keep_files_) remove_dir();
}

std::string redis_process::password_userinfo() const {
  return options_.password.empty() ? "" : ":" + percent_encode(options_.password) + "@";
}

std::string redis_process::url() const {
  return "redis://" + password_userinfo() + "127.0.0.1:" + std::to_string(port_);
}

std::string redis_process::tls_url() const {
  if (!options_.tls) return {};
  return "rediss://" + password_userinfo() + "127.0.0.1:" + std::to_string(tls_port_);
}

std::string redis_process::unix_path() const {
  return options_.unix_socket ? dir_ + "/redis.sock" : "";
}

std::string redis_process::ca_file() const {
  return options_.tls ? dir_ + "/ca.crt" : "";
}
std::string redis_process::tls_cert_file() const {
  return options_.tls ? dir_ + "/server.crt" : "";
}
std::string redis_process::tls_key_file() const {
  return options_.tls ? dir_ + "/server.key" : "";
}
std::string redis_process::log_file() const {
  return dir_ + "/redis.log";
}
std::string redis_process::config_file() const {
  return dir_ + "/redis.conf";
}

bool redis_process::reap_if_exited() const {
  if (pid_ < 0) return true;
  int status = 0;
  pid_t result = 0;
  do {
    result = ::waitpid(pid_, &status, WNOHANG);
  } while (result < 0 && errno == EINTR);
  // ECHILD: reaped elsewhere (SIGCHLD ignored); either way the process is gone.
  if (result == pid_ || result < 0) {
    last_status_ = result == pid_ ? status : -1;
    pid_ = -1;
    return true;
  }
  return false;
}

pid_t redis_process::pid() const {
  reap_if_exited();
  return pid_;
}

bool redis_process::running() const {
  return !reap_if_exited();
}

void redis_process::kill(int signal) {
  if (!running()) return;
  if (signal == SIGTERM) {
    stop();
    return;
  }
  if (::kill(pid_, signal) != 0) return;
  if (signal == SIGKILL) {
    reap(pid_);
    pid_ = -1;
  }
}

void redis_process::stop() noexcept {
  if (!running()) return;
  ::kill(pid_, SIGTERM);
  // A server stopped by SIGSTOP would keep SIGTERM pending forever.
  ::kill(pid_, SIGCONT);
  if (!wait_for_exit(pid_, clock_type::now() + options_.stop_timeout)) {
    ::kill(pid_, SIGKILL);
    reap(pid_);
  }
  pid_ = -1;
}

bool redis_process::wait_exit(std::chrono::milliseconds timeout) {
  if (pid_ < 0) return true;
  const std::optional<int> status = wait_for_exit(pid_, clock_type::now() + timeout);
  if (!status) return false;
  last_status_ = *status;
  pid_ = -1;
  return true;
}

void redis_process::start() {
  stop();
  // The port is only ours while the server runs: meanwhile any outgoing connection on this host
  // may get it as its local port. Such holders usually go away soon, so keep trying until
  // start_timeout instead of failing at once.
  const auto deadline = clock_type::now() + options_.start_timeout;
  while (launch(clock_type::now() < deadline) == launch_result::port_in_use) {
    std::this_thread::sleep_for(50ms);
  }
}

std::string redis_process::cli(const std::vector<std::string>& args) const {
  return cli(args, 10s);
}

std::string redis_process::cli(const std::vector<std::string>& args,
                               std::chrono::milliseconds timeout) const {
  std::vector<std::string> argv{options_.cli_executable, "-e", "-h", "127.0.0.1", "-p",
                                std::to_string(port_)};
  if (!options_.password.empty()) {
    argv.insert(argv.end(), {"-a", options_.password, "--no-auth-warning"});
  }
  argv.insert(argv.end(), args.begin(), args.end());
  const command_result result = run_command(argv, timeout);
  const std::string what = std::string(error_prefix) + "redis-cli " + join(args);
  if (result.timed_out) {
    throw std::runtime_error(what + " timed out after " + std::to_string(timeout.count()) + " ms");
  }
  if (result.exit_code != 0) {
    throw std::runtime_error(what + " failed (exit " + std::to_string(result.exit_code) +
                             "): " + last_lines(result.err + result.out, 5));
  }
  std::string out = result.out;
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string redis_process::log_tail(std::size_t lines) const {
  return last_lines(read_from(log_file(), 0), lines);
}

void redis_process::choose_ports() {
  const bool pick_port = options_.port == 0;
  const bool pick_tls_port = options_.tls && options_.tls_port == 0;
  port_ = options_.port;
  tls_port_ = options_.tls ? options_.tls_port : 0;
  // Picked ports are distinct from each other; a picked port could still equal the fixed one
  // (it is free because our server is not running), so try again in that case.
  for (int attempt = 0; attempt < 10; ++attempt) {
    const std::vector<std::uint16_t> picked = pick_free_ports(
        static_cast<std::size_t>(pick_port) + static_cast<std::size_t>(pick_tls_port));
    std::size_t next = 0;
    if (pick_port) port_ = picked[next++];
    if (pick_tls_port) tls_port_ = picked[next++];
    if (!options_.tls || port_ != tls_port_) return;
  }
  throw std::runtime_error(std::string(error_prefix) + "cannot pick distinct free ports");
}

void redis_process::write_config() const {
  // Only what needs redis.conf quoting lives here: users (rules verbatim, as on a `user` line) and
  // the password, which also stays out of `ps` this way. The rest is on the command line.
  std::string config = "# Generated by dlock::tools::redis_process.\n";
  if (!options_.password.empty()) config += "requirepass " + conf_quote(options_.password) + "\n";
  for (const std::string& rule : options_.acl_users)
    config += "user " + rule + "\n";
  write_file(config_file(), config);
}

void redis_process::make_tls_files() const {
  const bool own_ca = options_.tls_ca_dir.empty();
  const std::string ca_key = (own_ca ? dir_ : options_.tls_ca_dir) + "/ca.key";
  const std::string server_csr = dir_ + "/server.csr";
  const std::string server_ext = dir_ + "/server.ext";
  // EC keys and short validity keep generation to a few tens of milliseconds.
  if (own_ca) {
    run_openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                 "-nodes", "-keyout", ca_key, "-out", ca_file(), "-days", "2", "-subj",
                 "/CN=dlock test CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
                 "keyUsage=critical,keyCertSign,cRLSign"});
  } else {
    // A copy, so that ca_file() is in this server's directory like without a shared CA.
    fs::copy_file(options_.tls_ca_dir + "/ca.crt", ca_file(), fs::copy_options::overwrite_existing);
  }
  run_openssl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
               "-keyout", tls_key_file(), "-out", server_csr, "-subj", "/CN=127.0.0.1"});
  write_file(server_ext,
             "basicConstraints=critical,CA:FALSE\n"
             "keyUsage=critical,digitalSignature,keyEncipherment\n"
             "extendedKeyUsage=serverAuth,clientAuth\n"
             "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  // A random serial: clients may cache certificates by issuer and serial across test runs.
  std::random_device random;
  std::array<char, 17> serial{};
  std::snprintf(serial.data(), serial.size(), "%08x%08x", random() & 0x7fffffffU, random());
  run_openssl({"x509", "-req", "-in", server_csr, "-CA", ca_file(), "-CAkey", ca_key, "-set_serial",
               std::string("0x") + serial.data(), "-days", "2", "-extfile", server_ext, "-out",
               tls_cert_file()});
}

std::vector<std::string> redis_process::server_args() const {
  std::vector<std::string> args{options_.executable, config_file(), "--port", std::to_string(port_),
                                "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
                                dir_, "--logfile", log_file(), "--daemonize", "no",
                                "--protected-mode", "no",
                                // Redis 7 refuses DEBUG by default; tests use DEBUG SLEEP.
                                "--enable-debug-command", "yes"};
  if (options_.unix_socket) {
    args.insert(args.end(), {"--unixsocket", unix_path(), "--unixsocketperm", "700"});
  }
  if (options_.tls) {
    args.insert(args.end(), {"--tls-port", std::to_string(tls_port_), "--tls-cert-file",
                             tls_cert_file(), "--tls-key-file", tls_key_file(),
                             "--tls-ca-cert-file", ca_file(), "--tls-auth-clients", "no"});
  }
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  return args;
}

redis_process::launch_result redis_process::launch(bool may_retry_port) {
  const std::string stdout_file = dir_ + "/stdout.log";
  // Offsets: failure messages show what this attempt logged, not earlier runs.
  const std::uintmax_t log_offset = file_size_or_zero(log_file());
  const std::uintmax_t stdout_offset = file_size_or_zero(stdout_file);
  {
    // Early errors (a bad argument) go to stderr before the log file is open.
    const unique_fd output(
        ::open(stdout_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
    if (!output.valid()) throw_errno("open " + stdout_file);
    const unique_fd dev_null = open_dev_null();
    pid_ = spawn(server_args(), dev_null.get(), output.get(), output.get(),
                 options_.die_with_parent, options_.own_session);
  }

  const auto deadline = clock_type::now() + options_.start_timeout;
  bool foreign_seen = false;
  for (;;) {
    // Bound each probe so a wedged listener cannot hide that our child exited.
    const auto probe_deadline = std::min(deadline, clock_type::now() + 1s);
    const probe_result answer =
        probe(port_, pid_, config_file(), options_.password, probe_deadline);
    if (answer == probe_result::ready_verified) return launch_result::ready;
    if (answer == probe_result::foreign) foreign_seen = true;
    // Unverified: accept if our child is still alive (best effort; see probe()).
    const bool exited = reap_if_exited();
    if (answer == probe_result::ready_unverified && !exited) return launch_result::ready;

    if (exited) {
      const std::string output =
          read_from(log_file(), log_offset) + read_from(stdout_file, stdout_offset);
      const bool port_in_use =
          foreign_seen || output.find("Address already in use") != std::string::npos;
      if (port_in_use && may_retry_port) return launch_result::port_in_use;
      throw std::runtime_error(describe_failure("redis-server " + exit_description(last_status_) +
                                                    " during start" +
                                                    (port_in_use ? ": a port is in use" : ""),
                                                log_offset, stdout_offset));
    }
    if (clock_type::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      reap(pid_);
      pid_ = -1;
      throw std::runtime_error(describe_failure(
          "redis-server not ready within " + std::to_string(options_.start_timeout.count()) +
              " ms" + (foreign_seen ? " (another server answers on the port)" : ""),
          log_offset, stdout_offset));
    }
    std::this_thread::sleep_for(std::min<clock_type::duration>(10ms, deadline - clock_type::now()));
  }
}

std::string redis_process::describe_failure(const std::string& what, std::uintmax_t log_offset,
                                            std::uintmax_t stdout_offset) const {
  std::string message = std::string(error_prefix) + what + " (" + options_.executable + ", port " +
                        std::to_string(port_);
  if (options_.tls) message += ", tls port " + std::to_string(tls_port_);
  message += ")";
  const std::string log = last_lines(read_from(log_file(), log_offset), failure_log_lines);
  if (!log.empty()) message += "\n--- last lines of " + log_file() + " ---\n" + log;
  const std::string output =
      last_lines(read_from(dir_ + "/stdout.log", stdout_offset), failure_log_lines);
  if (!output.empty()) message += "\n--- redis-server stdout/stderr ---\n" + output;
  return message;
}

void redis_process::remove_dir() noexcept {
  if (dir_.empty()) return;
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

}  // namespace dlock::tools
