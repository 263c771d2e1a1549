# Warnings for dlock's own targets only (never pushed onto consumers through the public interface).
add_library(dlock_warnings INTERFACE)
target_compile_options(dlock_warnings INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                 -Wold-style-cast -Wcast-align>)
