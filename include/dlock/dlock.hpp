// dlock/dlock.hpp: everything public.
#pragma once

#include "dlock/client.hpp"
#include "dlock/count_down_latch.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_mutex.hpp"
#include "dlock/lock_lease.hpp"
#include "dlock/mutex.hpp"
#include "dlock/options.hpp"
#include "dlock/plain_lock.hpp"
#include "dlock/redlock.hpp"
#include "dlock/reply.hpp"
#include "dlock/script.hpp"
#include "dlock/semaphore.hpp"
#include "dlock/shared_mutex.hpp"
#include "dlock/subscription.hpp"
