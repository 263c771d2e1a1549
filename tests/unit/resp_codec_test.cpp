// tests/unit/resp_codec_test.cpp
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/reply.hpp"
#include "resp/codec.hpp"

namespace {

using dlock::reply;
using dlock::to_string;
using dlock::resp::append_command;
using dlock::resp::parser;
using dlock::resp::parser_limits;

using namespace std::string_literals;
using namespace std::string_view_literals;

reply bulk(std::string s) {
  return reply::make_bulk(std::move(s));
}
reply array(std::vector<reply> e) {
  return reply::make_array(std::move(e));
}

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

// What a connection does: append each chunk to the unconsumed tail, parse while bytes are
// consumed, keep the rest for the next chunk.
struct fed {
  std::vector<reply> replies;
  bool failed = false;
  std::string error;
  std::string tail;  // bytes left unconsumed at the end
};

fed feed(const std::vector<std::string>& chunks, parser_limits limits = {}) {
  parser p(limits);
  fed out;
  for (const std::string& chunk : chunks) {
    out.tail += chunk;
    for (;;) {
      const std::size_t n = p.parse(out.tail);
      if (p.failed()) {
        out.failed = true;
        out.error = p.error_message();
        return out;
      }
      out.tail.erase(0, n);
      if (p.done()) {
        out.replies.push_back(p.take());
      } else if (n == 0) {
        break;
      }
    }
  }
  return out;
}

fed feed_all(std::string stream, parser_limits limits = {}) {
  return feed({std::move(stream)}, limits);
}

// Feeds one complete input and expects exactly one reply, all bytes consumed.
reply parse_one(std::string_view input) {
  parser p;
  const std::size_t n = p.parse(input);
  EXPECT_FALSE(p.failed()) << p.error_message();
  EXPECT_TRUE(p.done());
  EXPECT_EQ(n, input.size());
  return p.take();
}

// Feeds `input` to a fresh parser (looping as a caller would) and returns its error.
std::string parse_error(std::string_view input, parser_limits limits = {}) {
  const fed result = feed({std::string(input)}, limits);
  EXPECT_TRUE(result.failed) << "input " << to_string(bulk(std::string(input))) << " was accepted";
  EXPECT_FALSE(result.error.empty());
  return result.error;
}

// A stream cut into its elements: each piece is a whole element as the parser consumes it (a
// simple line, a bulk header with its payload, or an array header alone).
const std::vector<std::string> stream_pieces = {
    "*3\r\n",
    "$3\r\nfoo\r\n",
    "*2\r\n",
    ":-42\r\n",
    "$-1\r\n",
    "+OK\r\n",  // first reply
    "-ERR bad thing\r\n",
    "$0\r\n\r\n",
    "*0\r\n",
    "*-1\r\n",
    "$4\r\na\r\nb\r\n",
    ":9223372036854775807\r\n",
    "*2\r\n",
    "*1\r\n",
    "*1\r\n",
    "$1\r\nx\r\n",
    "-inner\r\n",
};

const std::vector<reply> stream_replies = {
    array({bulk("foo"), array({reply::make_integer(-42), reply::make_nil()}),
           reply::make_simple("OK")}),
    reply::make_error("ERR bad thing"),
    bulk(""),
    array({}),
    reply::make_nil(),
    bulk("a\r\nb"),
    reply::make_integer(std::numeric_limits<std::int64_t>::max()),
    array({array({array({bulk("x")})}), reply::make_error("inner")}),
};

std::string joined(const std::vector<std::string>& pieces) {
  std::string s;
  for (const std::string& p : pieces)
    s += p;
  return s;
}

// ---------------------------------------------------------------------------------------------
// Encoding

TEST(RespEncode, SimpleCommand) {
  std::string out;
  append_command(out, {"SET", "key", "value"});
  EXPECT_EQ(out, "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n");
}

TEST(RespEncode, AppendsWithoutClearing) {
  std::string out = "prefix";
  append_command(out, {"PING"});
  append_command(out, {"GET", "k"});
  EXPECT_EQ(out, "prefix*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
}

TEST(RespEncode, BinaryArgumentsAreLengthPrefixedVerbatim) {
  const std::string binary = "a\r\nb\0c\n\r\xff"s;
  std::string out;
  ASSERT_EQ(binary.size(), 9u);
  append_command(out, {"SET", binary});
  EXPECT_EQ(out, "*2\r\n$3\r\nSET\r\n$9\r\n" + binary + "\r\n");
}

TEST(RespEncode, EmptyArgument) {
  std::string out;
  append_command(out, {"SET", "k", ""});
  EXPECT_EQ(out, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
}

// The encoder writes into room it reserved from an upper bound, then trims: many parts, long parts
// and multi-digit lengths must come out exact, after what the buffer already held.
TEST(RespEncode, ManyAndLongArgumentsEncodeExactly) {
  std::vector<std::string> parts;
  for (int i = 0; i < 1200; ++i)
    parts.push_back(std::string(static_cast<std::size_t>(i % 13), static_cast<char>('a' + i % 26)));
  parts.push_back(std::string(100'000, 'x'));
  const std::vector<std::string_view> views(parts.begin(), parts.end());
  std::string expected = "held*" + std::to_string(parts.size()) + "\r\n";
  for (const std::string& p : parts)
    expected += "$" + std::to_string(p.size()) + "\r\n" + p + "\r\n";
  std::string out = "held";
  append_command(out, views);
  EXPECT_EQ(out, expected);
}

TEST(RespEncode, EmptyCommandThrowsAndLeavesOutputAlone) {
  // Redis answers "*0" with nothing, which would misalign a pipeline's replies.
  std::string out = "kept";
  EXPECT_THROW(append_command(out, std::span<const std::string_view>{}), std::invalid_argument);
  EXPECT_THROW(append_command(out, {}), std::invalid_argument);
  EXPECT_EQ(out, "kept");
}

TEST(RespEncode, SpanAndInitializerListAgree) {
  const std::vector<std::string_view> args = {"EVALSHA", "abc", "1", "lock:x", "token", "30000"};
  std::string from_span;
  append_command(from_span, args);
  std::string from_list;
  append_command(from_list, {"EVALSHA", "abc", "1", "lock:x", "token", "30000"});
  EXPECT_EQ(from_span, from_list);
  EXPECT_EQ(from_span.substr(0, 4), "*6\r\n");
}

TEST(RespEncode, MultiDigitLengths) {
  const std::string big(123456, 'z');
  std::vector<std::string_view> args(12, "x");
  args.push_back(big);
  std::string out;
  append_command(out, args);
  EXPECT_EQ(out.substr(0, 5), "*13\r\n");
  const std::string header = "$123456\r\n";
  const std::size_t at = out.find(header);
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(out.size(), at + header.size() + big.size() + 2);
  EXPECT_EQ(out.substr(out.size() - 3), "z\r\n");
}

TEST(RespEncode, RoundTripsThroughTheParser) {
  // A command is itself an array of bulk strings, so the parser must read it back unchanged.
  const std::vector<std::string> args = {"SET", "", "\0\r\n\xfe"s, std::string(70000, '\n')};
  const std::vector<std::string_view> views(args.begin(), args.end());
  std::string out;
  append_command(out, views);
  std::vector<reply> expected;
  for (const std::string& a : args)
    expected.push_back(bulk(a));
  EXPECT_EQ(parse_one(out), array(expected));
}

TEST(RespEncode, ManyCommandsInOneBuffer) {
  std::string out;
  for (int i = 0; i < 1000; ++i)
    append_command(out, {"INCR", std::to_string(i)});
  const fed result = feed_all(out);
  ASSERT_FALSE(result.failed) << result.error;
  ASSERT_EQ(result.replies.size(), 1000u);
  EXPECT_EQ(result.replies[999], array({bulk("INCR"), bulk("999")}));
  EXPECT_TRUE(result.tail.empty());
}

// ---------------------------------------------------------------------------------------------
// to_string

TEST(RespToString, EachType) {
  EXPECT_EQ(to_string(reply::make_nil()), "nil");
  EXPECT_EQ(to_string(reply::make_simple("OK")), "+OK");
  EXPECT_EQ(to_string(reply::make_error("ERR x")), "-ERR x");
  EXPECT_EQ(to_string(reply::make_integer(1)), ":1");
  EXPECT_EQ(to_string(reply::make_integer(std::numeric_limits<std::int64_t>::min())),
            ":-9223372036854775808");
  EXPECT_EQ(to_string(bulk("foo")), "\"foo\"");
  EXPECT_EQ(to_string(bulk("")), "\"\"");
}

TEST(RespToString, EscapesNonPrintables) {
  EXPECT_EQ(to_string(bulk("a\r\n\0\x7f\xff"s)), "\"a\\x0d\\x0a\\x00\\x7f\\xff\"");
  EXPECT_EQ(to_string(bulk("say \"hi\" \\ bye")), "\"say \\\"hi\\\" \\\\ bye\"");
  EXPECT_EQ(to_string(reply::make_error("bad\tbyte")), "-bad\\x09byte");
}

TEST(RespToString, ArraysRecursively) {
  EXPECT_EQ(to_string(array({})), "[]");
  EXPECT_EQ(to_string(array({bulk("a"), bulk("b")})), "[\"a\", \"b\"]");
  EXPECT_EQ(to_string(array({reply::make_integer(1), array({reply::make_nil(), array({})}),
                             reply::make_simple("OK")})),
            "[:1, [nil, []], +OK]");
}

// ---------------------------------------------------------------------------------------------
// Decoding: each type

TEST(RespParse, SimpleString) {
  EXPECT_EQ(parse_one("+OK\r\n"), reply::make_simple("OK"));
  EXPECT_EQ(parse_one("+\r\n"), reply::make_simple(""));
  EXPECT_EQ(parse_one("+with spaces and : $ * chars\r\n"),
            reply::make_simple("with spaces and : $ * chars"));
}

TEST(RespParse, Error) {
  const reply r = parse_one("-WRONGTYPE Operation against a key\r\n");
  EXPECT_TRUE(r.is_error());
  EXPECT_EQ(r.str, "WRONGTYPE Operation against a key");
}

TEST(RespParse, Integers) {
  EXPECT_EQ(parse_one(":0\r\n"), reply::make_integer(0));
  EXPECT_EQ(parse_one(":1\r\n"), reply::make_integer(1));
  EXPECT_EQ(parse_one(":-1\r\n"), reply::make_integer(-1));
  EXPECT_EQ(parse_one(":9223372036854775807\r\n"),
            reply::make_integer(std::numeric_limits<std::int64_t>::max()));
  EXPECT_EQ(parse_one(":-9223372036854775808\r\n"),
            reply::make_integer(std::numeric_limits<std::int64_t>::min()));
}

TEST(RespParse, BulkStrings) {
  EXPECT_EQ(parse_one("$3\r\nfoo\r\n"), bulk("foo"));
  EXPECT_EQ(parse_one("$0\r\n\r\n"), bulk(""));
  EXPECT_EQ(parse_one("$8\r\n\r\n\0\r\n\xff\r\n\r\n"s), bulk("\r\n\0\r\n\xff\r\n"s));
  const std::string large(1 << 20, 'q');
  EXPECT_EQ(parse_one("$1048576\r\n" + large + "\r\n"), bulk(large));
}

TEST(RespParse, NilForms) {
  EXPECT_EQ(parse_one("$-1\r\n"), reply::make_nil());
  EXPECT_EQ(parse_one("*-1\r\n"), reply::make_nil());
  EXPECT_TRUE(parse_one("*-1\r\n").is_nil());
}

TEST(RespParse, EmptyArrayIsNotNil) {
  const reply r = parse_one("*0\r\n");
  EXPECT_TRUE(r.is_array());
  EXPECT_TRUE(r.elements.empty());
  EXPECT_NE(r, reply::make_nil());
}

TEST(RespParse, FlatArray) {
  EXPECT_EQ(parse_one("*3\r\n:1\r\n$1\r\na\r\n+b\r\n"),
            array({reply::make_integer(1), bulk("a"), reply::make_simple("b")}));
}

TEST(RespParse, NestedArrays) {
  EXPECT_EQ(parse_one("*3\r\n*2\r\n:1\r\n*0\r\n*1\r\n*1\r\n$-1\r\n-E\r\n"),
            array({array({reply::make_integer(1), array({})}), array({array({reply::make_nil()})}),
                   reply::make_error("E")}));
  // Nil elements inside an array are kept in place.
  EXPECT_EQ(parse_one("*3\r\n$-1\r\n*-1\r\n$0\r\n\r\n"),
            array({reply::make_nil(), reply::make_nil(), bulk("")}));
}

TEST(RespParse, StopsAfterOneReplyAndConsumesExactlyIt) {
  parser p;
  const std::string_view input = "+OK\r\n:5\r\n"sv;
  EXPECT_EQ(p.parse(input), 5u);
  ASSERT_TRUE(p.done());
  // Until the reply is taken the parser consumes nothing more.
  EXPECT_EQ(p.parse(input.substr(5)), 0u);
  EXPECT_EQ(p.take(), reply::make_simple("OK"));
  EXPECT_FALSE(p.done());
  EXPECT_EQ(p.parse(input.substr(5)), 4u);
  ASSERT_TRUE(p.done());
  EXPECT_EQ(p.take(), reply::make_integer(5));
}

TEST(RespParse, EmptyInputNeedsMore) {
  parser p;
  EXPECT_EQ(p.parse(""), 0u);
  EXPECT_FALSE(p.done());
  EXPECT_FALSE(p.failed());
}

TEST(RespParse, ReusableAcrossManyReplies) {
  std::string input;
  for (int i = 0; i < 10000; ++i)
    input += ":" + std::to_string(i) + "\r\n";
  parser p;
  std::string_view rest = input;
  for (int i = 0; i < 10000; ++i) {
    const std::size_t n = p.parse(rest);
    ASSERT_TRUE(p.done()) << i;
    ASSERT_EQ(p.take(), reply::make_integer(i));
    rest.remove_prefix(n);
  }
  EXPECT_TRUE(rest.empty());
}

// ---------------------------------------------------------------------------------------------
// Streaming

TEST(RespStream, BackToBackInOneBuffer) {
  const fed result = feed_all(joined(stream_pieces));
  ASSERT_FALSE(result.failed) << result.error;
  EXPECT_EQ(result.replies, stream_replies);
  EXPECT_TRUE(result.tail.empty());
}

TEST(RespStream, OneByteAtATime) {
  const std::string stream = joined(stream_pieces);
  std::vector<std::string> chunks;
  for (const char c : stream)
    chunks.emplace_back(1, c);
  const fed result = feed(chunks);
  ASSERT_FALSE(result.failed) << result.error;
  EXPECT_EQ(result.replies, stream_replies);
  EXPECT_TRUE(result.tail.empty());
}

TEST(RespStream, RandomChunkingsGiveIdenticalReplies) {
  const std::string stream = joined(stream_pieces);
  std::mt19937 rng(20240607);
  for (int round = 0; round < 500; ++round) {
    std::uniform_int_distribution<std::size_t> chunk_size(1, 1 + round % 40);
    std::vector<std::string> chunks;
    for (std::size_t at = 0; at < stream.size();) {
      const std::size_t n = std::min(chunk_size(rng), stream.size() - at);
      chunks.push_back(stream.substr(at, n));
      at += n;
    }
    const fed result = feed(chunks);
    ASSERT_FALSE(result.failed) << "round " << round << ": " << result.error;
    ASSERT_EQ(result.replies, stream_replies) << "round " << round;
    ASSERT_TRUE(result.tail.empty()) << "round " << round;
  }
}

TEST(RespStream, TruncatedInputNeedsMoreAndConsumesOnlyWholeElements) {
  // The first reply of the stream, a nested array, cut at every possible point.
  const std::vector<std::string> pieces(stream_pieces.begin(), stream_pieces.begin() + 6);
  const std::string input = joined(pieces);
  std::vector<std::size_t> boundaries = {0};
  for (const std::string& piece : pieces)
    boundaries.push_back(boundaries.back() + piece.size());

  for (std::size_t cut = 0; cut < input.size(); ++cut) {
    parser p;
    std::string_view rest = std::string_view(input).substr(0, cut);
    std::size_t consumed = 0;
    while (const std::size_t n = p.parse(rest)) {
      consumed += n;
      rest.remove_prefix(n);
    }
    ASSERT_FALSE(p.failed()) << "cut " << cut << ": " << p.error_message();
    ASSERT_FALSE(p.done()) << "cut " << cut;
    // Everything up to the last whole element, and nothing of a partial one.
    const std::size_t expected =
        *std::prev(std::upper_bound(boundaries.begin(), boundaries.end(), cut));
    ASSERT_EQ(consumed, expected) << "cut " << cut;

    // The caller's kept tail plus the remaining bytes completes the reply.
    const std::string tail = input.substr(consumed);
    ASSERT_EQ(p.parse(tail), tail.size()) << "cut " << cut;
    ASSERT_TRUE(p.done()) << "cut " << cut;
    ASSERT_EQ(p.take(), stream_replies[0]) << "cut " << cut;
  }
}

TEST(RespStream, BulkHeaderIsNotConsumedWithoutItsPayload) {
  parser p;
  EXPECT_EQ(p.parse("$5\r\nhel"), 0u);
  EXPECT_EQ(p.parse("$5\r\nhello"), 0u);  // payload there, CRLF not yet
  EXPECT_EQ(p.parse("$5\r\nhello\r"), 0u);
  EXPECT_FALSE(p.failed());
  EXPECT_FALSE(p.done());
  EXPECT_EQ(p.parse("$5\r\nhello\r\n"), 11u);
  EXPECT_EQ(p.take(), bulk("hello"));
}

TEST(RespStream, PartialArrayPersistsAcrossCalls) {
  parser p;
  // The array header and the first element are consumed; the partial second one is not.
  EXPECT_EQ(p.parse("*2\r\n$3\r\nfoo\r\n$3\r\nba"), 13u);
  EXPECT_FALSE(p.done());
  EXPECT_FALSE(p.failed());
  EXPECT_EQ(p.parse("$3\r\nbar\r\n+next\r\n"), 9u);
  ASSERT_TRUE(p.done());
  EXPECT_EQ(p.take(), array({bulk("foo"), bulk("bar")}));
}

TEST(RespStream, IncompleteLinesNeedMore) {
  for (const std::string_view input : {"+", "+OK", "+OK\r", "-ERR", ":12", ":12\r", "$", "$3",
                                       "$3\r", "*", "*2", "*2\r", "*-1\r", "$-1\r"}) {
    parser p;
    EXPECT_EQ(p.parse(input), 0u) << input;
    EXPECT_FALSE(p.failed()) << input << ": " << p.error_message();
    EXPECT_FALSE(p.done()) << input;
  }
}

// ---------------------------------------------------------------------------------------------
// Limits

TEST(RespLimits, OversizedBulkRejectedOnTheHeaderAlone) {
  parser_limits limits;
  limits.max_bulk_length = 16;
  // At the limit: waits for the payload.
  const fed at_limit = feed_all("$16\r\n", limits);
  EXPECT_FALSE(at_limit.failed) << at_limit.error;
  EXPECT_EQ(at_limit.tail, "$16\r\n");
  // One over: fails before any payload byte arrives.
  const std::string error = parse_error("$17\r\n", limits);
  EXPECT_TRUE(contains(error, "17")) << error;
  EXPECT_TRUE(contains(error, "16")) << error;
}

TEST(RespLimits, DefaultBulkLimitIsRedisProtoMaxBulkLen) {
  const fed at_limit = feed_all("$536870912\r\n");
  EXPECT_FALSE(at_limit.failed) << at_limit.error;
  parse_error("$536870913\r\n");
  parse_error("$9223372036854775807\r\n");
}

TEST(RespLimits, OversizedBulkInsideArray) {
  parser_limits limits;
  limits.max_bulk_length = 4;
  parse_error("*2\r\n$4\r\nabcd\r\n$5\r\n", limits);
}

TEST(RespLimits, ArrayLength) {
  parser_limits limits;
  limits.max_array_length = 4;
  EXPECT_EQ(feed_all("*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n", limits).replies.size(), 1u);
  const std::string error = parse_error("*5\r\n", limits);
  EXPECT_TRUE(contains(error, "5")) << error;
  parse_error("*1\r\n*5\r\n", limits);
}

TEST(RespLimits, HugeArrayHeaderFailsWithoutAllocating) {
  parse_error("*16777217\r\n");
  parse_error("*9223372036854775807\r\n");
  // At the default limit the header is accepted and the parser waits for elements.
  parser p;
  EXPECT_EQ(p.parse("*16777216\r\n"), 11u);
  EXPECT_FALSE(p.failed());
  EXPECT_FALSE(p.done());
}

std::string nested(std::size_t depth) {
  std::string s;
  for (std::size_t i = 0; i < depth; ++i)
    s += "*1\r\n";
  return s + ":7\r\n";
}

TEST(RespLimits, NestingDepth) {
  parser_limits limits;
  limits.max_depth = 3;
  const fed ok = feed_all(nested(3), limits);
  ASSERT_FALSE(ok.failed) << ok.error;
  EXPECT_EQ(ok.replies, std::vector<reply>{array({array({array({reply::make_integer(7)})})})});
  const std::string error = parse_error(nested(4), limits);
  EXPECT_TRUE(contains(error, "3")) << error;
  // An empty array is still an array at that depth.
  parse_error("*1\r\n*1\r\n*1\r\n*0\r\n", limits);
  // Nil is not an array and does not nest.
  EXPECT_FALSE(feed_all("*1\r\n*1\r\n*1\r\n*-1\r\n", limits).failed);
}

TEST(RespLimits, DefaultNestingDepth) {
  EXPECT_FALSE(feed_all(nested(32)).failed);
  parse_error(nested(33));
}

TEST(RespLimits, DepthIsPerReplyNotCumulative) {
  parser_limits limits;
  limits.max_depth = 2;
  const fed result = feed_all(nested(2) + nested(2) + nested(2), limits);
  EXPECT_FALSE(result.failed) << result.error;
  EXPECT_EQ(result.replies.size(), 3u);
}

TEST(RespLimits, LineWithoutCrlfBeyondLimit) {
  parser_limits limits;
  limits.max_line_length = 8;
  // Content of exactly the limit is fine, even when its CRLF arrives late.
  EXPECT_EQ(feed_all("+12345678\r\n", limits).replies,
            std::vector<reply>{reply::make_simple("12345678")});
  const fed waiting = feed_all("+12345678\r", limits);
  EXPECT_FALSE(waiting.failed) << waiting.error;
  EXPECT_EQ(waiting.tail, "+12345678\r");
  // Fewer bytes than the limit without CRLF: maybe more is coming.
  EXPECT_FALSE(feed_all("+1234567", limits).failed);
  // Limit + 2 bytes after the type byte and still no CRLF: give up.
  parse_error("+1234567890", limits);
  parse_error("-1234567890", limits);
  parse_error(":1234567890", limits);
  // A terminated line that is too long fails too.
  parse_error("+123456789\r\n", limits);
}

TEST(RespLimits, StreamedGarbageFailsOnceTheLimitIsReached) {
  parser_limits limits;
  limits.max_line_length = 100;
  parser p(limits);
  std::string buffer = "+";
  while (!p.failed() && buffer.size() < 10000) {
    buffer += 'g';
    EXPECT_EQ(p.parse(buffer), 0u);
  }
  ASSERT_TRUE(p.failed());
  EXPECT_EQ(buffer.size(), 1 + limits.max_line_length + 2);
}

TEST(RespLimits, DefaultLineLimit) {
  EXPECT_FALSE(feed_all("+" + std::string(1000, 'a')).failed);
  parse_error("+" + std::string(64 * 1024 + 2, 'a'));
  const std::string long_line(64 * 1024, 'a');
  EXPECT_EQ(parse_one("+" + long_line + "\r\n"), reply::make_simple(long_line));
}

TEST(RespLimits, HeaderLinesAreBoundedRegardlessOfLineLimit) {
  // A length or integer can never need more than 20 characters.
  parse_error("$" + std::string(30, '1'));
  parse_error("*" + std::string(30, '1'));
  parse_error(":" + std::string(30, '1'));
  parse_error("$" + std::string(30, 'x'));
}

// ---------------------------------------------------------------------------------------------
// Malformed input

TEST(RespMalformed, BadTypeByte) {
  for (const std::string& input : {"!x\r\n"s, "x\r\n"s, "\0\r\n"s, "\r\n"s, " +OK\r\n"s,
                                   // RESP3 types are not RESP2.
                                   "_\r\n"s, ",1.5\r\n"s, "#t\r\n"s, "%1\r\n"s, "~1\r\n"s}) {
    const std::string error = parse_error(input);
    EXPECT_TRUE(contains(error, "type")) << error;
  }
}

TEST(RespMalformed, BadTypeByteInsideArray) {
  parse_error("*2\r\n:1\r\n?\r\n");
}

TEST(RespMalformed, BadIntegers) {
  for (const std::string_view input :
       {":12a\r\n", ":\r\n", ":99999999999999999999\r\n", ":9223372036854775808\r\n",
        ":-9223372036854775809\r\n", ":+5\r\n", ": 5\r\n", ":5 \r\n", ":1.5\r\n", ":-\r\n",
        ":0x10\r\n"}) {
    parse_error(input);
  }
}

TEST(RespMalformed, NegativeLengths) {
  for (const std::string_view input : {"$-2\r\n", "*-2\r\n", "$-9223372036854775808\r\n"}) {
    const std::string error = parse_error(input);
    EXPECT_TRUE(contains(error, "invalid length")) << error;
  }
}

TEST(RespMalformed, NonDigitLengths) {
  for (const std::string_view input : {"$abc\r\n", "$\r\n", "$3x\r\nfoo\r\n", "$+3\r\nfoo\r\n",
                                       "*x\r\n", "*\r\n", "* 1\r\n", "$99999999999999999999\r\n"}) {
    parse_error(input);
  }
}

TEST(RespMalformed, BulkPayloadNotFollowedByCrlf) {
  for (const std::string_view input :
       {"$3\r\nfooXY", "$3\r\nfooX\n", "$3\r\nfoo\n\n", "$3\r\nfoo\n\r", "$3\r\nfoo\rX",
        "$3\r\nfoob\r\n", "$0\r\nX\r\n"}) {
    const std::string error = parse_error(input);
    EXPECT_TRUE(contains(error, "CRLF")) << error;
  }
}

TEST(RespMalformed, BareLineFeed) {
  for (const std::string_view input :
       {"+OK\n", "-ERR\n", ":1\n", "$3\nfoo\r\n", "*1\n:1\r\n", "\n", "+\n"}) {
    parse_error(input);
  }
}

TEST(RespMalformed, CarriageReturnInsideLine) {
  parse_error("+O\rK\r\n");
  parse_error(":1\r2\r\n");
}

TEST(RespMalformed, FailureIsSticky) {
  parser p;
  p.parse("$-2\r\n");
  ASSERT_TRUE(p.failed());
  const std::string first_error = p.error_message();
  EXPECT_EQ(p.parse("+OK\r\n"), 0u);
  EXPECT_TRUE(p.failed());
  EXPECT_FALSE(p.done());
  EXPECT_EQ(p.error_message(), first_error);
}

TEST(RespMalformed, RepliesBeforeTheFaultAreDelivered) {
  const fed result = feed_all("+OK\r\n:1\r\n$-5\r\n");
  EXPECT_TRUE(result.failed);
  EXPECT_EQ(result.replies, (std::vector<reply>{reply::make_simple("OK"), reply::make_integer(1)}));
}

TEST(RespMalformed, ResetAfterFailureMakesTheParserUsable) {
  parser p;
  // Fail in the middle of an array so there is partial state to discard.
  p.parse("*3\r\n:1\r\n!\r\n");
  ASSERT_TRUE(p.failed());
  p.reset();
  EXPECT_FALSE(p.failed());
  EXPECT_FALSE(p.done());
  EXPECT_TRUE(p.error_message().empty());
  EXPECT_EQ(p.parse("*1\r\n+OK\r\n"), 9u);
  ASSERT_TRUE(p.done());
  EXPECT_EQ(p.take(), array({reply::make_simple("OK")}));
}

TEST(RespMalformed, ResetDiscardsAPartialArray) {
  parser p;
  EXPECT_EQ(p.parse("*2\r\n:1\r\n"), 8u);
  p.reset();
  EXPECT_EQ(p.parse(":2\r\n"), 4u);
  ASSERT_TRUE(p.done());
  EXPECT_EQ(p.take(), reply::make_integer(2));
}

TEST(RespMalformed, ResetDiscardsAnUntakenReply) {
  parser p;
  p.parse("+OK\r\n");
  ASSERT_TRUE(p.done());
  p.reset();
  EXPECT_FALSE(p.done());
  EXPECT_EQ(p.parse(":3\r\n"), 4u);
  EXPECT_EQ(p.take(), reply::make_integer(3));
}

}  // namespace
