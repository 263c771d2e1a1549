// dlock_fault_delay_proxy: a TCP proxy that adds latency, for the fault suite's `latency` fault
// (netem is not available on the machines this runs on).
//
//   dlock_fault_delay_proxy --listen ADDRESS[:PORT] --upstream ADDRESS:PORT
//
// It listens on ADDRESS (an IPv4 address; on PORT, or on one the kernel chooses), prints
// "listening <port>" on stdout, and forwards every accepted connection to the upstream server.
// Each chunk read from either side is written to the other side `delay` milliseconds after it was
// read (never before a chunk read earlier in the same direction, so the byte stream keeps its
// order); an end of stream is forwarded the same way (shutdown of the writing side), a reset or
// error closes both sides at once. The delay starts at 0 and is set by lines on stdin:
//
//   delay <ms>      answered "delay <ms>" on stdout once in effect for every chunk read from then
//   on
//   cut             closes every connection and, until "mend", every one accepted (a link the
//                   network took away; the upstream server knows nothing of it); answered "cut"
//   mend            connections are forwarded again; answered "mend"
//
// End of stdin ends the proxy (it also dies with its parent: PR_SET_PDEATHSIG). Single-threaded:
// one poll() loop whose timeout is the next chunk's due time. Reading from a side stops while more
// than `max_queued_bytes` wait to be written the other way.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr std::size_t max_queued_bytes = 8U << 20U;  // per direction of one connection
constexpr std::size_t read_size = 64U << 10U;

std::int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "dlock_fault_delay_proxy: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) fail("fcntl");
}

// ADDRESS:PORT, or with `port_optional` also ADDRESS alone (port 0).
sockaddr_in parse_address(const std::string& text, bool port_optional) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  std::string host = text;
  const auto colon = text.rfind(':');
  if (colon == std::string::npos && !port_optional) {
    throw std::invalid_argument("no port in " + text);
  }
  if (colon != std::string::npos) {
    host = text.substr(0, colon);
    a.sin_port = htons(static_cast<std::uint16_t>(std::stoi(text.substr(colon + 1))));
  }
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    throw std::invalid_argument("not an IPv4 address: " + host);
  }
  return a;
}

struct chunk {
  std::int64_t due = 0;
  std::string data;  // empty: the end of the stream
};

// One direction of a connection: bytes read from `from`, written to `to` once due.
struct direction {
  int from = -1;
  int to = -1;
  std::deque<chunk> queue;
  std::size_t queued = 0;
  std::size_t written = 0;  // of the first chunk
  bool read_closed = false;
  bool write_closed = false;  // the end of the stream was forwarded
  bool blocked = false;       // the last write would have blocked: wait for POLLOUT
  std::int64_t last_due = 0;

  bool want_read() const { return !read_closed && queued < max_queued_bytes; }
};

struct connection {
  int client = -1;
  int upstream = -1;
  bool connecting = true;
  bool broken = false;
  direction up;    // client -> upstream
  direction down;  // upstream -> client

  bool finished() const { return broken || (up.write_closed && down.write_closed); }
};

class proxy {
 public:
  proxy(const sockaddr_in& listen_address, const sockaddr_in& upstream)
      : upstream_(upstream), listener_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (listener_ < 0) fail("socket");
    const int one = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(listener_, reinterpret_cast<const sockaddr*>(&listen_address),
               sizeof listen_address) != 0) {
      fail("bind");
    }
    if (::listen(listener_, 128) != 0) fail("listen");
    set_nonblocking(listener_);
  }

  std::uint16_t port() const {
    sockaddr_in a{};
    socklen_t length = sizeof a;
    if (::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &length) != 0) {
      fail("getsockname");
    }
    return ntohs(a.sin_port);
  }

  // Runs until stdin ends.
  void run() {
    std::string control;
    for (;;) {
      std::vector<pollfd> fds;
      std::vector<std::pair<connection*, int>> owners;  // which connection and side each fd is
      fds.push_back({STDIN_FILENO, POLLIN, 0});
      owners.emplace_back(nullptr, 0);
      fds.push_back({listener_, POLLIN, 0});
      owners.emplace_back(nullptr, 0);
      const std::int64_t now = now_ns();
      std::int64_t next_due = -1;
      for (connection& c : connections_) {
        short client_events = 0;
        short upstream_events = 0;
        if (c.connecting) {
          upstream_events = POLLOUT;
        } else {
          if (c.up.want_read()) client_events |= POLLIN;
          if (c.down.want_read()) upstream_events |= POLLIN;
          if (c.up.blocked) upstream_events |= POLLOUT;
          if (c.down.blocked) client_events |= POLLOUT;
          for (const direction* d : {&c.up, &c.down}) {
            if (!d->blocked && !d->queue.empty() && d->queue.front().due > now &&
                (next_due < 0 || d->queue.front().due < next_due)) {
              next_due = d->queue.front().due;
            }
          }
        }
        // A side with nothing to wait for is left out (fd -1): poll() would report its hang-up
        // again and again while a delayed chunk waits.
        fds.push_back({client_events != 0 ? c.client : -1, client_events, 0});
        owners.emplace_back(&c, 0);
        fds.push_back({upstream_events != 0 ? c.upstream : -1, upstream_events, 0});
        owners.emplace_back(&c, 1);
      }
      int timeout = -1;
      if (next_due >= 0) {
        timeout =
            static_cast<int>(std::max<std::int64_t>((next_due - now + 999'999) / 1'000'000, 0));
      }
      if (::poll(fds.data(), fds.size(), timeout) < 0) {
        if (errno == EINTR) continue;
        fail("poll");
      }
      if (fds[0].revents != 0) {
        const std::size_t open = connections_.size();
        if (!read_control(control)) return;
        if (connections_.size() != open) continue;  // cut: `owners` points at closed connections
      }
      if ((fds[1].revents & POLLIN) != 0) accept_all();
      for (std::size_t i = 2; i < fds.size(); ++i) {
        connection& c = *owners[i].first;
        if (fds[i].revents == 0 || c.broken) continue;
        if (owners[i].second == 1 && c.connecting) {
          int error = 0;
          socklen_t length = sizeof error;
          ::getsockopt(c.upstream, SOL_SOCKET, SO_ERROR, &error, &length);
          if (error != 0) {
            c.broken = true;  // the server is down (a restart): the client sees its connection end
            continue;
          }
          c.connecting = false;
          continue;
        }
        if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
          read_side(owners[i].second == 0 ? c.up : c.down, c);
        }
        if ((fds[i].revents & POLLOUT) != 0) {
          (owners[i].second == 0 ? c.down : c.up).blocked = false;
        }
      }
      const std::int64_t after = now_ns();
      for (connection& c : connections_) {
        if (c.connecting || c.broken) continue;
        write_due(c.up, c, after);
        write_due(c.down, c, after);
      }
      for (auto it = connections_.begin(); it != connections_.end();) {
        if (it->finished()) {
          ::close(it->client);
          ::close(it->upstream);
          it = connections_.erase(it);
        } else {
          ++it;
        }
      }
    }
  }

 private:
  // Reads control lines; false at the end of stdin.
  bool read_control(std::string& buffer) {
    char data[256];
    const ssize_t got = ::read(STDIN_FILENO, data, sizeof data);
    if (got < 0 && errno == EINTR) return true;
    if (got <= 0) return false;
    buffer.append(data, static_cast<std::size_t>(got));
    for (auto end = buffer.find('\n'); end != std::string::npos; end = buffer.find('\n')) {
      const std::string line = buffer.substr(0, end);
      buffer.erase(0, end + 1);
      long long ms = 0;
      if (std::sscanf(line.c_str(), "delay %lld", &ms) == 1 && ms >= 0) {
        delay_ns_ = ms * 1'000'000;
        std::printf("delay %lld\n", ms);
      } else if (line == "cut" || line == "mend") {
        cut_ = line == "cut";
        if (cut_) close_all();
        std::printf("%s\n", line.c_str());
      } else {
        std::printf("error: unknown command '%s'\n", line.c_str());
      }
      std::fflush(stdout);
    }
    return true;
  }

  void close_all() {
    for (const connection& c : connections_) {
      ::close(c.client);
      ::close(c.upstream);
    }
    connections_.clear();
  }

  void accept_all() {
    for (;;) {
      const int client = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (client < 0) {
        if (errno == EINTR) continue;
        return;  // EAGAIN, or an aborted connection
      }
      if (cut_) {
        ::close(client);
        continue;
      }
      const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (upstream < 0) {
        ::close(client);
        continue;
      }
      const int one = 1;
      ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ::setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      connection& c = connections_.emplace_back();
      c.client = client;
      c.upstream = upstream;
      c.up.from = client;
      c.up.to = upstream;
      c.down.from = upstream;
      c.down.to = client;
      if (::connect(upstream, reinterpret_cast<const sockaddr*>(&upstream_), sizeof upstream_) ==
          0) {
        c.connecting = false;
      } else if (errno != EINPROGRESS) {
        c.broken = true;
      }
    }
  }

  void read_side(direction& d, connection& c) {
    if (d.read_closed) return;
    std::string data(read_size, '\0');
    const ssize_t got = ::read(d.from, data.data(), data.size());
    if (got < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      c.broken = true;  // a reset: both sides go at once
      return;
    }
    data.resize(static_cast<std::size_t>(got));
    if (got == 0) d.read_closed = true;
    // Never before a chunk read earlier: the delay may have shrunk since.
    const std::int64_t due = std::max(now_ns() + delay_ns_, d.last_due);
    d.last_due = due;
    d.queued += data.size();
    d.queue.push_back({due, std::move(data)});
  }

  static void write_due(direction& d, connection& c, std::int64_t now) {
    while (!d.blocked && !d.queue.empty() && d.queue.front().due <= now) {
      chunk& first = d.queue.front();
      if (first.data.empty()) {
        ::shutdown(d.to, SHUT_WR);
        d.write_closed = true;
        d.queue.pop_front();
        continue;
      }
      const ssize_t sent =
          ::send(d.to, first.data.data() + d.written, first.data.size() - d.written, MSG_NOSIGNAL);
      if (sent < 0) {
        if (errno == EAGAIN || errno == EINTR) {
          d.blocked = true;
          return;
        }
        c.broken = true;
        return;
      }
      d.written += static_cast<std::size_t>(sent);
      if (d.written == first.data.size()) {
        d.queued -= first.data.size();
        d.written = 0;
        d.queue.pop_front();
      }
    }
  }

  sockaddr_in upstream_;
  int listener_;
  std::int64_t delay_ns_ = 0;
  bool cut_ = false;
  std::list<connection> connections_;  // stable addresses while fds point at them
};

}  // namespace

int main(int argc, char** argv) {
  std::string listen_text;
  std::string upstream_text;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string option = argv[i];
    if (option == "--listen") {
      listen_text = argv[i + 1];
    } else if (option == "--upstream") {
      upstream_text = argv[i + 1];
    } else {
      std::fprintf(stderr, "dlock_fault_delay_proxy: unknown option %s\n", option.c_str());
      return 2;
    }
  }
  if (listen_text.empty() || upstream_text.empty()) {
    std::fprintf(
        stderr, "usage: dlock_fault_delay_proxy --listen ADDRESS[:PORT] --upstream ADDRESS:PORT\n");
    return 2;
  }
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return 70;
  ::signal(SIGPIPE, SIG_IGN);
  try {
    proxy p(parse_address(listen_text, true), parse_address(upstream_text, false));
    std::printf("listening %u\n", static_cast<unsigned>(p.port()));
    std::fflush(stdout);
    p.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_fault_delay_proxy: %s\n", e.what());
    return 2;
  }
  return 0;
}
