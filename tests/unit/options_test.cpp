#include <gtest/gtest.h>

#include "dlock/error.hpp"
#include "dlock/options.hpp"

namespace dlock {
namespace {

TEST(ClientOptionsUrl, PlainHostPortAndDatabase) {
  const auto o = client_options::from_url("redis://10.0.0.5:6380/3");
  EXPECT_EQ(o.host, "10.0.0.5");
  EXPECT_EQ(o.port, 6380);
  EXPECT_EQ(o.database, 3);
  EXPECT_FALSE(o.tls.enabled);
  EXPECT_TRUE(o.password.empty());
  EXPECT_TRUE(o.unix_path.empty());
}

TEST(ClientOptionsUrl, DefaultPort) {
  const auto o = client_options::from_url("redis://localhost");
  EXPECT_EQ(o.host, "localhost");
  EXPECT_EQ(o.port, 6379);
  EXPECT_EQ(o.database, 0);
}

TEST(ClientOptionsUrl, PasswordOnlyBothSpellings) {
  EXPECT_EQ(client_options::from_url("redis://:s3cret@h:1").password, "s3cret");
  EXPECT_EQ(client_options::from_url("redis://:s3cret@h:1").username, "");
  EXPECT_EQ(client_options::from_url("redis://s3cret@h:1").password, "s3cret");
}

TEST(ClientOptionsUrl, AclUserAndPercentDecoding) {
  const auto o = client_options::from_url("redis://al%69ce:p%40ss%3Aw0rd@h:7000");
  EXPECT_EQ(o.username, "alice");
  EXPECT_EQ(o.password, "p@ss:w0rd");
  EXPECT_EQ(o.port, 7000);
}

TEST(ClientOptionsUrl, PasswordMayContainAtSign) {
  const auto o = client_options::from_url("redis://u:a@b@host:1");
  EXPECT_EQ(o.password, "a@b");
  EXPECT_EQ(o.host, "host");
}

TEST(ClientOptionsUrl, TlsScheme) {
  const auto o = client_options::from_url("rediss://cache.example:6390");
  EXPECT_TRUE(o.tls.enabled);
  EXPECT_TRUE(o.tls.verify_peer);
  EXPECT_EQ(o.port, 6390);
}

TEST(ClientOptionsUrl, Ipv6) {
  const auto o = client_options::from_url("redis://[::1]:6379/1");
  EXPECT_EQ(o.host, "::1");
  EXPECT_EQ(o.database, 1);
  EXPECT_EQ(o.endpoint(), "[::1]:6379");
}

TEST(ClientOptionsUrl, UnixSocket) {
  const auto o = client_options::from_url("unix:///run/redis/redis.sock?db=2");
  EXPECT_EQ(o.unix_path, "/run/redis/redis.sock");
  EXPECT_EQ(o.database, 2);
  EXPECT_EQ(o.endpoint(), "unix:/run/redis/redis.sock");
}

TEST(ClientOptionsUrl, DatabaseAsQueryParameter) {
  EXPECT_EQ(client_options::from_url("redis://h:1?db=5").database, 5);
}

void expect_invalid(std::string_view url, std::string_view needle) {
  try {
    (void)client_options::from_url(url);
    ADD_FAILURE() << "accepted " << url;
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument) << url;
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << url << " gave: " << e.what();
  }
}

TEST(ClientOptionsUrl, BadUrlsGiveClearErrors) {
  expect_invalid("", "missing scheme");
  expect_invalid("127.0.0.1:6379", "missing scheme");
  expect_invalid("http://h:1", "unknown scheme 'http'");
  expect_invalid("redis://", "missing host");
  expect_invalid("redis://:pw@:6379", "missing host");
  expect_invalid("redis://h:", "empty port");
  expect_invalid("redis://h:0", "port '0'");
  expect_invalid("redis://h:65536", "port '65536'");
  expect_invalid("redis://h:12ab", "port '12ab'");
  expect_invalid("redis://h:1/x", "database 'x'");
  expect_invalid("redis://h:1/-1", "database '-1'");
  expect_invalid("redis://[::1", "unterminated IPv6");
  expect_invalid("redis://[::1]x", "junk after IPv6");
  expect_invalid("redis://u:%zz@h", "invalid %-escape");
  expect_invalid("redis://u:%4@h", "truncated %-escape");
  expect_invalid("redis://h?timeout=3", "unknown query parameter 'timeout'");
  expect_invalid("unix://relative.sock", "absolute socket path");
}

TEST(ClientOptionsUrl, ErrorNeverEchoesThePassword) {
  try {
    (void)client_options::from_url("redis://u:hunter2@h:99999");
    FAIL() << "accepted a bad port";
  } catch (const error& e) {
    EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dlock

TEST(ClientOptionsUrl, SeveralHostsOfOneDeployment) {
  const auto o = dlock::client_options::from_url(
      "rediss://alice:s%2Cecret@10.0.0.5:7000,10.0.0.6,[::1]:7002/2");
  EXPECT_EQ(o.host, "10.0.0.5");
  EXPECT_EQ(o.port, 7000);
  ASSERT_EQ(o.more_hosts.size(), 2u);
  EXPECT_EQ(o.more_hosts[0], (dlock::server_address{"10.0.0.6", 6379}));
  EXPECT_EQ(o.more_hosts[1], (dlock::server_address{"::1", 7002}));
  EXPECT_EQ(o.password, "s,ecret");
  EXPECT_EQ(o.username, "alice");
  EXPECT_TRUE(o.tls.enabled);
  EXPECT_EQ(o.database, 2);
  EXPECT_EQ(o.addresses().size(), 3u);
  EXPECT_EQ(o.addresses().front(), (dlock::server_address{"10.0.0.5", 7000}));
}

TEST(ClientOptionsUrl, AnEmptyHostInAListIsRefused) {
  for (const char* url : {"redis://a:1,", "redis://,a:1", "redis://a:1,,b:2",
                          "redis://a:1,b:", "redis://a:1,b:0", "redis://a:1,[::1"}) {
    EXPECT_THROW(dlock::client_options::from_url(url), dlock::error) << url;
  }
}

TEST(ClientOptionsUrl, SentinelUrls) {
  const auto o = dlock::client_options::from_url(
      "rediss-sentinel://:data%40pw@10.0.0.1,10.0.0.2:26380/3?sentinel_password=s%26p#my%20master");
  EXPECT_EQ(o.sentinel.master_name, "my master");
  EXPECT_EQ(o.sentinel.password, "s&p");
  EXPECT_EQ(o.password, "data@pw");
  EXPECT_TRUE(o.tls.enabled);
  EXPECT_EQ(o.database, 3);
  EXPECT_EQ(o.host, "10.0.0.1");
  EXPECT_EQ(o.port, 26379) << "the sentinels' default port";
  ASSERT_EQ(o.more_hosts.size(), 1u);
  EXPECT_EQ(o.more_hosts[0], (dlock::server_address{"10.0.0.2", 26380}));

  const auto plain = dlock::client_options::from_url("redis-sentinel://h#m");
  EXPECT_FALSE(plain.tls.enabled);
  EXPECT_EQ(plain.sentinel.master_name, "m");
}

TEST(ClientOptionsUrl, BadSentinelUrls) {
  dlock::expect_invalid("redis-sentinel://h", "names its master after '#'");
  dlock::expect_invalid("redis-sentinel://h#", "names its master after '#'");
  dlock::expect_invalid("redis://h#m", "only goes with redis-sentinel");
  dlock::expect_invalid("redis://h?sentinel_password=x",
                        "unknown query parameter 'sentinel_password'");
}

TEST(ClientOptionsUrl, MinReplicasInTheQuery) {
  const auto o = dlock::client_options::from_url("redis://h?min_replicas=2&replica_timeout=250");
  EXPECT_EQ(o.locks.min_replicas, 2u);
  EXPECT_EQ(o.locks.replica_timeout, std::chrono::milliseconds(250));
  EXPECT_EQ(dlock::client_options::from_url("redis://h").locks.min_replicas, 0u);
  dlock::expect_invalid("redis://h?replica_timeout=0", "replica_timeout '0'");
  dlock::expect_invalid("redis://h?min_replicas=x", "min_replicas 'x'");
}
