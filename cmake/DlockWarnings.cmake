# Warnings for dlock's own targets only (never pushed onto consumers through the public interface).
add_library(dlock_warnings INTERFACE)
target_compile_options(dlock_warnings INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                 -Wold-style-cast -Wcast-align>
  # g++ 12 warns about every member a C++20 designated initializer leaves to its default
  # (`{.urgent = true}`), which is what such an initializer is for; clang warns only about
  # positional ones.
  $<$<CXX_COMPILER_ID:GNU>:-Wno-missing-field-initializers>)
