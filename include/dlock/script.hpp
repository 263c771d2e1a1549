// dlock/script.hpp
//
// A Lua script run with EVALSHA, falling back to EVAL when the server answers NOSCRIPT (after a
// restart or SCRIPT FLUSH). dlock's own scripts are .lua files embedded at build time.
#pragma once

#include <string>

namespace dlock {

class script {
 public:
  // Computes the script's SHA1 once, here.
  explicit script(std::string source);

  const std::string& source() const noexcept { return source_; }
  const std::string& sha1() const noexcept { return sha1_; }  // 40 lowercase hex digits

 private:
  std::string source_;
  std::string sha1_;
};

}  // namespace dlock
