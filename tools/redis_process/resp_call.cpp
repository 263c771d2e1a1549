#include "resp_call.hpp"

#include "unique_fd.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace dlock::tools {
namespace {

using clock_type = std::chrono::steady_clock;

constexpr std::string_view error_prefix = "dlock::tools::resp_call: ";
// Deeper replies than this are not something a fixture asks for; refuse rather than recurse.
constexpr int max_depth = 16;

class link {
 public:
  link(std::uint16_t port, clock_type::time_point deadline) : port_(port), deadline_(deadline) {
    fd_ = unique_fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd_.valid()) fail("socket");
    const int one = 1;
    ::setsockopt(fd_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) {
      return;
    }
    if (errno != EINPROGRESS) fail("connect");
    wait(POLLOUT, "connect");
    int error = 0;
    socklen_t length = sizeof error;
    if (::getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) fail("connect");
    if (error != 0) {
      errno = error;
      fail("connect");
    }
  }

  void send_all(std::string_view data) {
    while (!data.empty()) {
      // MSG_NOSIGNAL: a server that closes must not kill the test binary by SIGPIPE.
      const ssize_t sent = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (sent > 0) {
        data.remove_prefix(static_cast<std::size_t>(sent));
      } else if (sent < 0 && errno == EINTR) {
        continue;
      } else if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        wait(POLLOUT, "send");
      } else {
        fail("send");
      }
    }
  }

  resp_value read_value(int depth = 0) {
    if (depth > max_depth) protocol("reply nested too deeply");
    const std::string line = read_line();
    if (line.empty()) protocol("empty reply line");
    const std::string_view rest = std::string_view(line).substr(1);
    resp_value value;
    switch (line.front()) {
      case '+':
        value.type = resp_value::kind::simple;
        value.str = rest;
        return value;
      case '-':
        value.type = resp_value::kind::error;
        value.str = rest;
        return value;
      case ':':
        value.type = resp_value::kind::integer;
        value.integer = number(rest);
        return value;
      case '$': {
        const long long size = number(rest);
        if (size < 0) return value;  // nil
        value.type = resp_value::kind::bulk;
        value.str = read_exact(static_cast<std::size_t>(size) + 2);
        value.str.resize(static_cast<std::size_t>(size));
        return value;
      }
      case '*': {
        const long long count = number(rest);
        if (count < 0) return value;  // nil
        value.type = resp_value::kind::array;
        value.elements.reserve(static_cast<std::size_t>(std::min(count, 1024LL)));
        for (long long i = 0; i < count; ++i)
          value.elements.push_back(read_value(depth + 1));
        return value;
      }
      default:
        protocol("unexpected reply type '" + line.substr(0, 1) + "'");
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(std::string(error_prefix) + what +
                             " 127.0.0.1:" + std::to_string(port_) + ": " + std::strerror(errno));
  }
  [[noreturn]] void protocol(const std::string& what) const {
    throw std::runtime_error(std::string(error_prefix) + "127.0.0.1:" + std::to_string(port_) +
                             ": " + what);
  }

  void wait(short events, const char* what) {
    for (;;) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline_ - clock_type::now()).count();
      if (left <= 0) {
        errno = ETIMEDOUT;
        fail(what);
      }
      pollfd entry{fd_.get(), events, 0};
      const int ready = ::poll(&entry, 1, static_cast<int>(std::min<long long>(left, INT_MAX)));
      if (ready > 0) return;  // errors and hang-ups show up in the next send/recv
      if (ready < 0 && errno != EINTR) fail(what);
    }
  }

  void fill() {
    std::array<char, 16384> chunk{};
    for (;;) {
      const ssize_t got = ::recv(fd_.get(), chunk.data(), chunk.size(), 0);
      if (got > 0) {
        buffer_.append(chunk.data(), static_cast<std::size_t>(got));
        return;
      }
      if (got == 0) protocol("connection closed before the reply ended");
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) fail("recv");
      wait(POLLIN, "recv");
    }
  }

  std::string read_line() {
    for (;;) {
      const std::size_t end = buffer_.find("\r\n", consumed_);
      if (end != std::string::npos) {
        std::string line = buffer_.substr(consumed_, end - consumed_);
        consumed_ = end + 2;
        return line;
      }
      compact();
      fill();
    }
  }

  std::string read_exact(std::size_t size) {
    while (buffer_.size() - consumed_ < size) {
      compact();
      fill();
    }
    std::string data = buffer_.substr(consumed_, size);
    consumed_ += size;
    return data;
  }

  void compact() {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }

  long long number(std::string_view text) const {
    long long value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size()) {
      protocol("bad number '" + std::string(text) + "'");
    }
    return value;
  }

  std::uint16_t port_;
  clock_type::time_point deadline_;
  unique_fd fd_;
  std::string buffer_;
  std::size_t consumed_ = 0;
};

}  // namespace

const resp_value* resp_value::field(std::string_view name) const {
  if (type != kind::array) return nullptr;
  for (std::size_t i = 0; i + 1 < elements.size(); i += 2) {
    const resp_value& key = elements[i];
    if ((key.type == kind::bulk || key.type == kind::simple) && key.str == name) {
      return &elements[i + 1];
    }
  }
  return nullptr;
}

std::string resp_value::to_string() const {
  switch (type) {
    case kind::simple:
    case kind::bulk:
      return str;
    case kind::error:
      return "(error) " + str;
    case kind::integer:
      return std::to_string(integer);
    case kind::nil:
      return "(nil)";
    case kind::array: {
      std::string text = "[";
      for (std::size_t i = 0; i < elements.size(); ++i) {
        if (i > 0) text += ", ";
        text += elements[i].to_string();
      }
      return text + "]";
    }
  }
  return {};
}

resp_value resp_call(std::uint16_t port, const std::vector<std::string>& args,
                     std::chrono::milliseconds timeout) {
  return std::move(resp_call_all(port, {args}, timeout).front());
}

std::vector<resp_value> resp_call_all(std::uint16_t port,
                                      const std::vector<std::vector<std::string>>& commands,
                                      std::chrono::milliseconds timeout) {
  std::string request;
  for (const std::vector<std::string>& args : commands) {
    if (args.empty()) throw std::invalid_argument(std::string(error_prefix) + "empty command");
    request += "*" + std::to_string(args.size()) + "\r\n";
    for (const std::string& arg : args) {
      request += "$" + std::to_string(arg.size()) + "\r\n";
      request += arg;
      request += "\r\n";
    }
  }
  if (commands.empty()) return {};
  link connection(port, clock_type::now() + timeout);
  connection.send_all(request);
  std::vector<resp_value> replies;
  replies.reserve(commands.size());
  for (std::size_t i = 0; i < commands.size(); ++i)
    replies.push_back(connection.read_value());
  return replies;
}

}  // namespace dlock::tools
