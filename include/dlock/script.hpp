// dlock/script.hpp
//
// A Lua script run with EVALSHA, falling back to EVAL when the server answers NOSCRIPT (after a
// restart or SCRIPT FLUSH). dlock's own scripts are .lua files embedded at build time.
#pragma once

#include <memory>
#include <string>

namespace dlock {

class script {
 public:
  // Computes the script's SHA1 once, here.
  explicit script(std::string source);
  // A move copies (the source is shared), so no script is ever left without its source.
  script(const script&) = default;
  script& operator=(const script&) = default;

  const std::string& source() const noexcept { return *source_; }
  const std::string& sha1() const noexcept { return sha1_; }  // 40 lowercase hex digits
  // The source, shared: a request keeps it for its EVAL fallback without copying it (the lock
  // scripts are kilobytes long, and a copy per call cost a lock + release a fifth of its client
  // instructions).
  const std::shared_ptr<const std::string>& shared_source() const noexcept { return source_; }

 private:
  std::shared_ptr<const std::string> source_;  // never null
  std::string sha1_;
};

}  // namespace dlock
