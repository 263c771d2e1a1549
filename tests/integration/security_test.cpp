// Authentication, ACL users, SELECT and TLS against real servers.
#include <gtest/gtest.h>

#include "dlock/client.hpp"
#include "support/redis_fixture.hpp"

namespace dlock {
namespace {

using test::redis_server;

// Runs one PING; returns the error it raised (empty on success) and its message.
std::pair<std::error_code, std::string> ping(const client_options& o) {
  try {
    client c{o};
    c.command({"PING"});
    return {};
  } catch (const error& e) {
    return {e.code(), e.what()};
  }
}

tools::redis_process_options with_password(std::string password) {
  tools::redis_process_options po;
  po.password = std::move(password);
  return po;
}

TEST(Security, RightPasswordIsAccepted) {
  redis_server server{with_password("s3cret")};
  client c{server.url()};  // the fixture's URL carries the password
  EXPECT_EQ(c.command({"PING"}).str, "PONG");
}

TEST(Security, WrongPasswordGivesAuthFailed) {
  redis_server server{with_password("s3cret")};
  client_options o;
  o.port = server.port();
  o.password = "guess";
  const auto [ec, what] = ping(o);
  EXPECT_EQ(ec, errc::auth_failed);
  EXPECT_NE(what.find("WRONGPASS"), std::string::npos) << what;
  EXPECT_EQ(what.find("guess"), std::string::npos) << "the password leaked into: " << what;
}

TEST(Security, MissingPasswordGivesAuthFailed) {
  redis_server server{with_password("s3cret")};
  client_options o;
  o.port = server.port();
  const auto [ec, what] = ping(o);
  EXPECT_EQ(ec, errc::auth_failed);
  EXPECT_NE(what.find("NOAUTH"), std::string::npos) << what;
}

TEST(Security, AclUserAuthenticatesAndUnknownUserIsRefused) {
  tools::redis_process_options po;
  po.acl_users = {"alice on >wonderland ~* &* +@all"};
  redis_server server{po};

  client_options alice;
  alice.port = server.port();
  alice.username = "alice";
  alice.password = "wonderland";
  client c{alice};
  EXPECT_EQ(c.command({"ACL", "WHOAMI"}).str, "alice");

  client_options bob = alice;
  bob.username = "bob";
  const auto [ec, what] = ping(bob);
  EXPECT_EQ(ec, errc::auth_failed);
  EXPECT_NE(what.find("WRONGPASS"), std::string::npos) << what;
}

TEST(Security, RefusedSelectStopsTheConnection) {
  redis_server server;
  client_options o = client_options::from_url(server.url());
  o.database = 1000;  // the server has 16
  const auto [ec, what] = ping(o);
  EXPECT_EQ(ec, errc::auth_failed);
  EXPECT_NE(what.find("DB index is out of range"), std::string::npos) << what;
}

tools::redis_process_options with_tls() {
  tools::redis_process_options po;
  po.tls = true;
  return po;
}

TEST(Security, TlsRoundTripWithVerifiedCertificate) {
  redis_server server{with_tls()};
  client_options o = client_options::from_url(server.tls_url());
  o.tls.ca_file = server.ca_file();
  client c{o};
  const std::string value(100'000, 'x');  // more than one TLS record each way
  c.command({"SET", "tls-key", value});
  EXPECT_EQ(c.command({"GET", "tls-key"}).str, value);
}

TEST(Security, TlsServerNotTrustedGivesTlsFailed) {
  redis_server server{with_tls()};
  client_options o = client_options::from_url(server.tls_url());  // system CAs only
  EXPECT_EQ(ping(o).first, errc::tls_failed);
}

TEST(Security, TlsNameMismatchGivesTlsFailed) {
  redis_server server{with_tls()};
  client_options o = client_options::from_url(server.tls_url());
  o.tls.ca_file = server.ca_file();
  o.tls.server_name = "not-the-server.example";
  EXPECT_EQ(ping(o).first, errc::tls_failed);
}

TEST(Security, MissingCaFileIsAnInvalidArgument) {
  client_options o = client_options::from_url("rediss://127.0.0.1:1");
  o.tls.ca_file = "/nonexistent/ca.pem";
  EXPECT_EQ(ping(o).first, errc::invalid_argument);
}

}  // namespace
}  // namespace dlock
