#include "net/request_queue.hpp"

#include <gtest/gtest.h>

#include "dlock/error.hpp"

namespace dlock::net {
namespace {

using namespace std::chrono_literals;

struct outcome {
  int calls = 0;
  std::error_code ec;
  reply r;
};

completion record(outcome& o) {
  return [&o](std::error_code ec, reply r) {
    ++o.calls;
    o.ec = ec;
    o.r = std::move(r);
  };
}

void push(request_queue& q, std::initializer_list<std::string_view> args, completion done,
          clock::time_point deadline = clock::time_point::max()) {
  q.push(std::span<const std::string_view>(args.begin(), args.size()), std::move(done), deadline);
}

void run(finished_list& list) {
  for (auto& f : list)
    f.run();
  list.clear();
}

TEST(RequestQueue, BytesAreBatchedInOrderAndRepliesMatchInOrder) {
  request_queue q;
  outcome a, b;
  push(q, {"GET", "a"}, record(a));
  push(q, {"GET", "b"}, record(b));
  EXPECT_TRUE(q.has_unwritten());
  std::string out;
  EXPECT_EQ(q.take_unwritten(out), 2u);
  EXPECT_EQ(out, "*2\r\n$3\r\nGET\r\n$1\r\na\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n");
  EXPECT_FALSE(q.has_unwritten());

  finished_list done;
  ASSERT_TRUE(q.match(reply::make_bulk("A"), done));
  ASSERT_TRUE(q.match(reply::make_bulk("B"), done));
  run(done);
  EXPECT_EQ(a.r.str, "A");
  EXPECT_EQ(b.r.str, "B");
  EXPECT_EQ(q.size(), 0u);
}

TEST(RequestQueue, ReplyWithoutWrittenRequestIsAProtocolViolation) {
  request_queue q;
  outcome a;
  push(q, {"PING"}, record(a));  // queued but not written: the server cannot answer it yet
  finished_list done;
  EXPECT_FALSE(q.match(reply::make_simple("PONG"), done));
  EXPECT_EQ(a.calls, 0);
}

TEST(RequestQueue, ErrorRepliesCompleteWithServerError) {
  request_queue q;
  outcome a;
  push(q, {"INCR", "text"}, record(a));
  std::string out;
  q.take_unwritten(out);
  finished_list done;
  q.match(reply::make_error("ERR value is not an integer"), done);
  run(done);
  EXPECT_EQ(a.ec, errc::server_error);
  EXPECT_EQ(a.r.str, "ERR value is not an integer");
}

TEST(RequestQueue, LinkLossFailsOnlyWrittenRequests) {
  request_queue q;
  outcome written, unwritten;
  push(q, {"SET", "k", "1"}, record(written));
  std::string out;
  q.take_unwritten(out);
  push(q, {"SET", "k", "2"}, record(unwritten));

  finished_list done;
  q.fail_written(make_error_code(errc::connection_lost), "gone", done);
  run(done);
  EXPECT_EQ(written.calls, 1);
  EXPECT_EQ(written.ec, errc::connection_lost);
  EXPECT_EQ(written.r.str, "gone");
  EXPECT_EQ(unwritten.calls, 0);

  // The unwritten one goes out on the next link, and only its bytes.
  out.clear();
  EXPECT_EQ(q.take_unwritten(out), 1u);
  EXPECT_EQ(out, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n2\r\n");
  q.match(reply::make_simple("OK"), done);
  run(done);
  EXPECT_EQ(unwritten.calls, 1);
  EXPECT_FALSE(unwritten.ec);
}

TEST(RequestQueue, TimeoutCompletesEarlyAndTheLateReplyIsDropped) {
  request_queue q;
  outcome slow, next;
  const auto t0 = clock::now();
  push(q, {"DEBUG", "SLEEP", "1"}, record(slow), t0 + 100ms);
  push(q, {"PING"}, record(next), t0 + 5s);
  std::string out;
  q.take_unwritten(out);

  finished_list done;
  q.expire(t0 + 99ms, done);
  EXPECT_TRUE(done.empty());
  q.expire(t0 + 100ms, done);
  run(done);
  EXPECT_EQ(slow.calls, 1);
  EXPECT_EQ(slow.ec, errc::timeout);
  EXPECT_EQ(q.next_deadline(), t0 + 5s);

  // The late reply still takes its slot, so PING gets PONG, not the sleeper's OK.
  q.match(reply::make_simple("OK"), done);
  q.match(reply::make_simple("PONG"), done);
  run(done);
  EXPECT_EQ(slow.calls, 1);
  EXPECT_EQ(next.calls, 1);
  EXPECT_EQ(next.r.str, "PONG");
  EXPECT_FALSE(q.next_deadline().has_value());
}

TEST(RequestQueue, AnUnsentRequestThatTimesOutSaysWhyItWasNotSent) {
  request_queue q;
  outcome sent, unsent;
  const auto t0 = clock::now();
  push(q, {"GET", "a"}, record(sent), t0 + 100ms);
  std::string out;
  q.take_unwritten(out);
  push(q, {"GET", "b"}, record(unsent), t0 + 100ms);

  finished_list done;
  q.expire(t0 + 100ms, done, "refused");
  run(done);
  EXPECT_EQ(sent.ec, errc::timeout);
  EXPECT_EQ(unsent.ec, errc::timeout);
  // Only the unwritten one blames the link: the written one may have been executed.
  EXPECT_EQ(sent.r.str, "no reply within the request timeout");
  EXPECT_EQ(unsent.r.str, "no reply within the request timeout (not sent yet: refused)");
}

TEST(RequestQueue, NextDeadlineIsTheEarliestPendingOneWhateverTheOrder) {
  request_queue q;
  const auto t0 = clock::now();
  push(
      q, {"A"}, [](std::error_code, reply) {}, t0 + 3s);
  push(
      q, {"B"}, [](std::error_code, reply) {}, t0 + 1s);
  push(
      q, {"C"}, [](std::error_code, reply) {}, t0 + 2s);
  EXPECT_EQ(q.next_deadline(), t0 + 1s);
}

TEST(RequestQueue, FailAllEmptiesEverything) {
  request_queue q;
  outcome a, b;
  push(q, {"A"}, record(a));
  std::string out;
  q.take_unwritten(out);
  push(q, {"B"}, record(b));
  finished_list done;
  q.fail_all(make_error_code(errc::client_stopped), "stopped", done);
  run(done);
  EXPECT_EQ(a.ec, errc::client_stopped);
  EXPECT_EQ(b.ec, errc::client_stopped);
  EXPECT_EQ(q.size(), 0u);
  EXPECT_FALSE(q.has_unwritten());
}

TEST(RequestQueue, AnUrgentRetryGoesAheadOfUnwrittenButBehindWrittenRequests) {
  request_queue q;
  outcome written, later, retry;
  push(q, {"A"}, record(written));
  std::string out;
  q.take_unwritten(out);
  push(q, {"B"}, record(later));
  const std::string_view retry_args[] = {"R"};
  q.push_front_unwritten(retry_args, record(retry), clock::time_point::max());
  out.clear();
  EXPECT_EQ(q.take_unwritten(out), 2u);
  EXPECT_EQ(out, "*1\r\n$1\r\nR\r\n*1\r\n$1\r\nB\r\n");
  finished_list done;
  q.match(reply::make_simple("a"), done);
  q.match(reply::make_simple("r"), done);
  q.match(reply::make_simple("b"), done);
  run(done);
  EXPECT_EQ(written.r.str, "a");
  EXPECT_EQ(retry.r.str, "r");
  EXPECT_EQ(later.r.str, "b");
}

TEST(RequestQueue, NullCompletionReadsAndDropsTheReply) {
  request_queue q;
  push(q, {"PING"}, nullptr);
  std::string out;
  q.take_unwritten(out);
  finished_list done;
  EXPECT_TRUE(q.match(reply::make_simple("PONG"), done));
  EXPECT_TRUE(done.empty());
}

TEST(RequestQueue, UnmatchedBytesTravelWithoutASlot) {
  request_queue q;
  q.push_unmatched("*2\r\n$9\r\nSUBSCRIBE\r\n$1\r\nc\r\n");
  std::string out;
  EXPECT_EQ(q.take_unwritten(out), 0u);
  EXPECT_EQ(out, "*2\r\n$9\r\nSUBSCRIBE\r\n$1\r\nc\r\n");
}

}  // namespace
}  // namespace dlock::net
