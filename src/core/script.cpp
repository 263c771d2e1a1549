#include "dlock/script.hpp"

#include <openssl/evp.h>

#include "dlock/error.hpp"

namespace dlock {

script::script(std::string source)
    : source_(std::make_shared<const std::string>(std::move(source))) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(source_->data(), source_->size(), digest, &length, EVP_sha1(), nullptr) != 1) {
    throw error(errc::invalid_argument, "cannot compute the SHA1 of a script");
  }
  static constexpr char hex[] = "0123456789abcdef";
  sha1_.reserve(2 * length);
  for (unsigned int i = 0; i < length; ++i) {
    sha1_ += hex[digest[i] >> 4];
    sha1_ += hex[digest[i] & 0xf];
  }
}

}  // namespace dlock
