// The asynchronous lock API against a real redis-server: lock_lease objects acquired by callback
// and by std::future, released from any thread.
#include <gtest/gtest.h>

#include "dlock/dlock.hpp"
#include "support/redis_fixture.hpp"
