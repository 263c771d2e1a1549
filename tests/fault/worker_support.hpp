// What the fault suite's worker programs share: the append-only record file, and entering the
// network namespace the driver made for the worker (netns_lab.hpp).
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace dlock::fault {

// One line, one write(): a kill -9 cannot cut it, and lines written by several processes to the
// same file (O_APPEND) never interleave.
class record_file {
 public:
  explicit record_file(const std::string& path)
      : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) {
    if (fd_ < 0) {
      throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
    }
  }
  ~record_file() { ::close(fd_); }
  record_file(const record_file&) = delete;
  record_file& operator=(const record_file&) = delete;

  void line(const std::string& text) const {
    const std::string out = text + "\n";
    const ssize_t written = ::write(fd_, out.data(), out.size());
    if (written != static_cast<ssize_t>(out.size())) {
      throw std::runtime_error(std::string("cannot write a record: ") + std::strerror(errno));
    }
  }

 private:
  int fd_;
};

inline std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

// Moves the calling process into the network namespace at `path` (/var/run/netns/NAME). Call it
// before any thread or socket exists: setns() applies to the calling thread, and threads started
// later inherit it.
inline void enter_netns(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  const int rc = ::setns(fd, CLONE_NEWNET);
  const int error = errno;
  ::close(fd);
  if (rc != 0) throw std::runtime_error("setns " + path + ": " + std::strerror(error));
}

}  // namespace dlock::fault
