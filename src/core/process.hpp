// src/core/process.hpp
//
// After fork() the child has a copy of every client but none of its threads: the I/O thread that
// all work goes through exists only in the parent, a mutex another thread held at the fork stays
// locked for ever, and the sockets are shared with the parent. So a client (and every handle and
// lease made from it) refuses all work in a child with errc::forked, before touching any lock or
// socket, and its destructor there returns at once, leaving its memory (as _exit would). Code
// that may run in a child compares the generation it saw when it was made with the current one.
#pragma once

#include <cstdint>

namespace dlock::core {

// 0 in the process that first made a client; one more in every child forked after that (a
// pthread_atfork handler counts). Cheap: one atomic load.
std::uint64_t fork_generation() noexcept;

// Starts counting forks (once per process; later calls do nothing). Call before making anything
// that must notice a fork.
void watch_forks();

// Throws dlock::error(errc::forked) when `generation` is not the current one.
void check_same_process(std::uint64_t made_in);

}  // namespace dlock::core
