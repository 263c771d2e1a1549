// Tests of the redis-server launcher itself (tools/redis_process) and of the test fixture helpers.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "redis_process.hpp"
#include "support/redis_fixture.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using dlock::test::redis_server;
using dlock::test::unique_key;
using dlock::tools::command_result;
using dlock::tools::redis_process;
using dlock::tools::redis_process_options;
using dlock::tools::run_command;
using steady = std::chrono::steady_clock;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The message of the std::runtime_error that `make` throws; fails the test if it does not throw.
template <typename F>
std::string runtime_error_message(F make) {
  try {
    make();
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected std::runtime_error";
  return {};
}

// redis-cli against an explicit endpoint, independent of redis_process::cli().
command_result redis_cli(std::vector<std::string> args) {
  args.insert(args.begin(), {"redis-cli", "-e"});
  return run_command(args);
}

TEST(RedisProcess, StartsAndAnswersPing) {
  redis_server server;
  EXPECT_TRUE(server.running());
  ASSERT_GT(server.pid(), 0);
  EXPECT_NE(server.port(), 0);
  EXPECT_EQ(server.url(), "redis://127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(server.tls_port(), 0);
  EXPECT_EQ(server.tls_url(), "");
  EXPECT_EQ(server.unix_path(), "");
  EXPECT_EQ(server.ca_file(), "");

  EXPECT_EQ(server.cli({"PING"}), "PONG");
  // The process we started is the one answering on port().
  EXPECT_TRUE(
      contains(server.cli({"INFO", "server"}), "process_id:" + std::to_string(server.pid())));
  // The readiness probe recognises the server by its config file.
  EXPECT_TRUE(contains(server.cli({"INFO", "server"}), "config_file:" + server.config_file()));
  EXPECT_TRUE(contains(server.log_tail(), "Ready to accept connections"));
}

TEST(RedisProcess, AppliesTheTestConfiguration) {
  redis_server server;
  EXPECT_EQ(server.cli({"CONFIG", "GET", "bind"}), "bind\n127.0.0.1");
  EXPECT_EQ(server.cli({"CONFIG", "GET", "save"}), "save\n");
  EXPECT_EQ(server.cli({"CONFIG", "GET", "appendonly"}), "appendonly\nno");
  EXPECT_EQ(server.cli({"CONFIG", "GET", "dir"}), "dir\n" + fs::canonical(server.dir()).string());
  EXPECT_EQ(server.cli({"CONFIG", "GET", "logfile"}), "logfile\n" + server.log_file());
  // DEBUG is blocked by default in Redis 7; tests rely on DEBUG SLEEP.
  EXPECT_EQ(server.cli({"DEBUG", "SLEEP", "0"}), "OK");
}

TEST(RedisProcess, ExtraArgsOverrideDefaults) {
  redis_process_options options;
  options.extra_args = {"--maxclients", "100", "--save", "900 1"};
  redis_server server(options);
  EXPECT_EQ(server.cli({"CONFIG", "GET", "maxclients"}), "maxclients\n100");
  EXPECT_EQ(server.cli({"CONFIG", "GET", "save"}), "save\n900 1");
}

TEST(RedisProcess, AServiceLikeServerLeadsASessionOfItsOwn) {
  // By default a server stays in the session (and scheduling group) of the process that started
  // it; service_options() puts it in one of its own, as a server run as a service is.
  redis_server beside;
  EXPECT_EQ(::getsid(beside.pid()), ::getsid(0));
  redis_server service(dlock::tools::service_options());
  EXPECT_EQ(::getsid(service.pid()), service.pid());
  EXPECT_EQ(service.cli({"PING"}), "PONG");
  // Stopped by its pid all the same.
  const pid_t pid = service.pid();
  service.stop();
  EXPECT_FALSE(service.running());
  EXPECT_EQ(::kill(pid, 0), -1);
}

TEST(RedisProcess, CliThrowsOnErrorReply) {
  redis_server server;
  const std::string message = runtime_error_message([&] { server.cli({"NO-SUCH-COMMAND", "x"}); });
  EXPECT_TRUE(contains(message, "unknown command")) << message;
  // Values come back exactly, without the trailing newline only.
  server.cli({"SET", unique_key("spaced"), " a b "});
  EXPECT_EQ(server.cli({"GET", unique_key("spaced")}), " a b ");
}

TEST(RedisProcess, TwoServersGetDifferentPorts) {
  redis_server first;
  redis_server second;
  EXPECT_NE(first.port(), second.port());
  EXPECT_NE(first.dir(), second.dir());
  EXPECT_NE(first.pid(), second.pid());
  // They are independent servers, not two views of one.
  const std::string key = unique_key("only-in-first");
  EXPECT_EQ(first.cli({"SET", key, "1"}), "OK");
  EXPECT_EQ(first.cli({"EXISTS", key}), "1");
  EXPECT_EQ(second.cli({"EXISTS", key}), "0");
}

TEST(RedisProcess, FixedPortIsUsed) {
  redis_process_options options;
  options.port = dlock::tools::find_free_port();
  redis_server server(options);
  EXPECT_EQ(server.port(), options.port);
  EXPECT_EQ(server.cli({"PING"}), "PONG");
}

TEST(RedisProcess, FixedPortTakenByAnotherServerFails) {
  redis_server occupant;
  redis_process_options options;
  options.port = occupant.port();
  const auto begin = steady::now();
  const std::string message = runtime_error_message([&] { redis_process clash(options); });
  EXPECT_LT(steady::now() - begin, 5s);
  // occupant answers PING on that port; the launcher must not take it for its own server.
  EXPECT_TRUE(contains(message, "port is in use")) << message;
  EXPECT_EQ(occupant.cli({"PING"}), "PONG");
}

TEST(RedisProcess, KillThenStartComesBackOnSamePort) {
  redis_server server;
  const std::uint16_t port = server.port();
  const pid_t old_pid = server.pid();
  const std::string key = unique_key("lost-on-restart");
  ASSERT_EQ(server.cli({"SET", key, "1"}), "OK");

  server.kill(SIGKILL);
  EXPECT_FALSE(server.running());
  EXPECT_EQ(server.pid(), -1);
  EXPECT_THROW(server.cli({"PING"}), std::runtime_error);
  EXPECT_EQ(::kill(old_pid, 0), -1) << "SIGKILLed server still exists (not reaped?)";

  server.start();
  EXPECT_TRUE(server.running());
  EXPECT_EQ(server.port(), port);
  EXPECT_NE(server.pid(), old_pid);
  EXPECT_EQ(server.cli({"PING"}), "PONG");
  // A new process without persistence: the data is gone.
  EXPECT_EQ(server.cli({"EXISTS", key}), "0");
}

TEST(RedisProcess, StopIsGracefulAndStartRestarts) {
  redis_server server;
  const std::uint16_t port = server.port();
  server.stop();
  EXPECT_FALSE(server.running());
  EXPECT_EQ(server.pid(), -1);
  EXPECT_TRUE(contains(server.log_tail(), "ready to exit")) << server.log_tail();
  server.stop();  // a second stop does nothing

  server.start();
  EXPECT_EQ(server.port(), port);
  EXPECT_EQ(server.cli({"PING"}), "PONG");
}

TEST(RedisProcess, StartWhileRunningRestarts) {
  redis_server server;
  const pid_t old_pid = server.pid();
  server.start();
  EXPECT_NE(server.pid(), old_pid);
  EXPECT_EQ(server.cli({"PING"}), "PONG");
}

TEST(RedisProcess, KillSigtermStopsAndReaps) {
  redis_server server;
  server.kill(SIGTERM);
  EXPECT_EQ(server.pid(), -1);
  EXPECT_TRUE(contains(server.log_tail(), "ready to exit")) << server.log_tail();
}

TEST(RedisProcess, SigstopFreezesUntilSigcont) {
  redis_server server;
  server.kill(SIGSTOP);
  EXPECT_TRUE(server.running());
  // The stopped server accepts the connection but never answers.
  EXPECT_THROW(server.cli({"PING"}, 300ms), std::runtime_error);
  server.kill(SIGCONT);
  EXPECT_EQ(server.cli({"PING"}), "PONG");
}

TEST(RedisProcess, StopOfAStoppedServerDoesNotWaitForSigkill) {
  redis_process_options options;
  options.stop_timeout = 5s;
  redis_server server(options);
  server.kill(SIGSTOP);
  const auto begin = steady::now();
  server.stop();
  EXPECT_LT(steady::now() - begin, 4s);  // SIGCONT let it handle SIGTERM
  EXPECT_FALSE(server.running());
  EXPECT_TRUE(contains(server.log_tail(), "ready to exit")) << server.log_tail();
}

TEST(RedisProcess, WaitExitReapsAServerThatShutsItselfDown) {
  redis_server server;
  EXPECT_FALSE(server.wait_exit(50ms));  // still running
  server.cli({"SHUTDOWN", "NOSAVE"});
  EXPECT_TRUE(server.wait_exit(10s));
  EXPECT_FALSE(server.running());
  EXPECT_EQ(server.pid(), -1);
  server.start();
  EXPECT_EQ(server.cli({"PING"}), "PONG");
}

TEST(RedisProcess, PasswordIsRequiredAndInTheUrl) {
  redis_process_options options;
  options.password = "p a\"s\\s:@/";  // quoting in redis.conf and percent-encoding in the URL
  redis_server server(options);
  EXPECT_EQ(server.url(),
            "redis://:p%20a%22s%5Cs%3A%40%2F@127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(server.cli({"CONFIG", "GET", "requirepass"}), "requirepass\n" + options.password);

  const command_result anonymous = redis_cli({"-p", std::to_string(server.port()), "PING"});
  EXPECT_NE(anonymous.exit_code, 0);
  EXPECT_TRUE(contains(anonymous.out + anonymous.err, "NOAUTH")) << anonymous.out << anonymous.err;

  const command_result wrong =
      redis_cli({"-p", std::to_string(server.port()), "-a", "wrong", "--no-auth-warning", "PING"});
  EXPECT_NE(wrong.exit_code, 0);
}

TEST(RedisProcess, AclUsersAreCreated) {
  redis_process_options options;
  options.acl_users = {"alice on >wonderland ~* &* +@all", "bob on >builder ~bob:* -@all +get"};
  redis_server server(options);
  const std::string port = std::to_string(server.port());

  const command_result alice = redis_cli({"-p", port, "--user", "alice", "--pass", "wonderland",
                                          "--no-auth-warning", "ACL", "WHOAMI"});
  EXPECT_EQ(alice.exit_code, 0) << alice.err;
  EXPECT_EQ(alice.out, "alice\n");

  const command_result bob = redis_cli({"-p", port, "--user", "bob", "--pass", "builder",
                                        "--no-auth-warning", "SET", "bob:key", "1"});
  EXPECT_NE(bob.exit_code, 0);
  EXPECT_TRUE(contains(bob.out + bob.err, "NOPERM")) << bob.out << bob.err;

  // redis-cli carries on as the default user after a failed AUTH; the server must refuse alice.
  const command_result bad_password = redis_cli(
      {"-p", port, "--user", "alice", "--pass", "nope", "--no-auth-warning", "ACL", "WHOAMI"});
  EXPECT_TRUE(contains(bad_password.err, "WRONGPASS")) << bad_password.err;
  EXPECT_EQ(bad_password.out, "default\n");
}

TEST(RedisProcess, RejectsAclRuleWithLineBreak) {
  redis_process_options options;
  options.acl_users = {"alice on nopass\nuser mallory on nopass +@all"};
  EXPECT_THROW(redis_process server(options), std::invalid_argument);
}

TEST(RedisProcess, TlsServesVerifiableCertificate) {
  redis_process_options options;
  options.tls = true;
  redis_server server(options);
  ASSERT_NE(server.tls_port(), 0);
  EXPECT_NE(server.tls_port(), server.port());
  EXPECT_EQ(server.tls_url(), "rediss://127.0.0.1:" + std::to_string(server.tls_port()));
  ASSERT_TRUE(fs::is_regular_file(server.ca_file()));
  const std::string tls_port = std::to_string(server.tls_port());

  const command_result tls_ping =
      redis_cli({"--tls", "--cacert", server.ca_file(), "-p", tls_port, "PING"});
  EXPECT_EQ(tls_ping.exit_code, 0) << tls_ping.err;
  EXPECT_EQ(tls_ping.out, "PONG\n");
  // Plain TCP is still served for readiness checks and helpers.
  EXPECT_EQ(server.cli({"PING"}), "PONG");

  // Without our CA the certificate is not trusted.
  const command_result untrusted = redis_cli({"--tls", "-p", tls_port, "PING"});
  EXPECT_NE(untrusted.exit_code, 0);

  // The certificate names 127.0.0.1 and localhost, and nothing else.
  const auto verify = [&](const std::string& flag, const std::string& name) {
    return run_command({"openssl", "verify", "-CAfile", server.ca_file(), flag, name,
                        server.tls_cert_file()})
        .exit_code;
  };
  EXPECT_EQ(verify("-verify_ip", "127.0.0.1"), 0);
  EXPECT_EQ(verify("-verify_hostname", "localhost"), 0);
  EXPECT_NE(verify("-verify_hostname", "example.com"), 0);
}

TEST(RedisProcess, TlsPortSurvivesRestart) {
  redis_process_options options;
  options.tls = true;
  redis_server server(options);
  const std::uint16_t tls_port = server.tls_port();
  server.kill();
  server.start();
  EXPECT_EQ(server.tls_port(), tls_port);
  const command_result tls_ping =
      redis_cli({"--tls", "--cacert", server.ca_file(), "-p", std::to_string(tls_port), "PING"});
  EXPECT_EQ(tls_ping.out, "PONG\n") << tls_ping.err;
}

TEST(RedisProcess, UnixSocketIsPrivate) {
  redis_process_options options;
  options.unix_socket = true;
  redis_server server(options);
  const std::string path = server.unix_path();
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(fs::path(path).parent_path(), fs::path(server.dir()));
  struct stat info {};
  ASSERT_EQ(::stat(path.c_str(), &info), 0) << std::strerror(errno);
  EXPECT_TRUE(S_ISSOCK(info.st_mode));
  EXPECT_EQ(info.st_mode & 0777, 0700U);

  const command_result ping = redis_cli({"-s", path, "PING"});
  EXPECT_EQ(ping.out, "PONG\n") << ping.err;
}

TEST(RedisProcess, DestructorStopsServerAndRemovesTempDir) {
  std::string dir;
  pid_t pid = -1;
  {
    redis_process server;
    dir = server.dir();
    pid = server.pid();
    ASSERT_TRUE(fs::is_directory(dir));
    EXPECT_TRUE(fs::is_regular_file(server.log_file()));
  }
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_EQ(::kill(pid, 0), -1) << "server process still exists";
}

TEST(RedisProcess, KeepFilesKeepsTempDir) {
  std::string dir;
  std::string log;
  {
    redis_process server;
    server.keep_files(true);
    dir = server.dir();
    log = server.log_file();
  }
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_TRUE(fs::is_regular_file(log));
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// Sets TMPDIR for one scope, restoring the previous value afterwards.
class scoped_tmpdir {
 public:
  explicit scoped_tmpdir(const fs::path& dir) {
    const char* previous = std::getenv("TMPDIR");
    if (previous != nullptr) previous_ = previous;
    ::setenv("TMPDIR", dir.c_str(), 1);
  }
  ~scoped_tmpdir() {
    if (previous_) {
      ::setenv("TMPDIR", previous_->c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
  }
  scoped_tmpdir(const scoped_tmpdir&) = delete;
  scoped_tmpdir& operator=(const scoped_tmpdir&) = delete;

 private:
  std::optional<std::string> previous_;
};

TEST(RedisProcess, TempDirHonoursTmpdir) {
  const fs::path base = fs::temp_directory_path() / ("dlock-tmpdir-" + std::to_string(::getpid()));
  fs::create_directories(base);
  std::string dir;
  {
    const scoped_tmpdir tmpdir(base);
    redis_server server;
    dir = server.dir();
    EXPECT_EQ(server.cli({"PING"}), "PONG");
  }
  EXPECT_EQ(fs::path(dir).parent_path(), base);
  fs::remove_all(base);
}

TEST(RedisProcess, UnixSocketAvoidsTooLongTmpdir) {
  // sockaddr_un paths are limited to about 108 bytes.
  const fs::path base = fs::temp_directory_path() / ("dlock-tmpdir-" + std::to_string(::getpid())) /
                        std::string(120, 'd');
  fs::create_directories(base);
  {
    const scoped_tmpdir tmpdir(base);
    redis_process_options options;
    options.unix_socket = true;
    redis_server server(options);
    EXPECT_EQ(fs::path(server.dir()).parent_path(), fs::path("/tmp"));
    EXPECT_EQ(redis_cli({"-s", server.unix_path(), "PING"}).out, "PONG\n");
  }
  fs::remove_all(base.parent_path());
}

TEST(RedisProcess, MissingExecutableThrowsQuickly) {
  for (const char* executable :
       {"/nonexistent/redis-server", "dlock-no-such-redis-server", "/etc/hostname"}) {
    redis_process_options options;
    options.executable = executable;
    const auto begin = steady::now();
    const std::string message = runtime_error_message([&] { redis_process server(options); });
    EXPECT_LT(steady::now() - begin, 2s) << executable;
    EXPECT_TRUE(contains(message, executable)) << message;
  }
}

TEST(RedisProcess, EarlyExitFailsAtOnceWithLogTail) {
  redis_process_options options;
  options.extra_args = {"--no-such-directive", "x"};
  options.start_timeout = 30s;
  const auto begin = steady::now();
  const std::string message = runtime_error_message([&] { redis_process server(options); });
  EXPECT_LT(steady::now() - begin, 5s);  // did not wait for start_timeout
  EXPECT_TRUE(contains(message, "exited with status 1")) << message;
  EXPECT_TRUE(contains(message, "Bad directive")) << message;
}

TEST(RunCommand, CollectsOutputAndExitCode) {
  const command_result result = run_command({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.out, "out\n");
  EXPECT_EQ(result.err, "err\n");
}

TEST(RunCommand, KillsOnTimeout) {
  const auto begin = steady::now();
  const command_result result = run_command({"sleep", "10"}, 200ms);
  EXPECT_LT(steady::now() - begin, 5s);
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.exit_code, -1);
}

TEST(RedisFixture, UniqueKeyNamesTheTest) {
  EXPECT_EQ(unique_key("lock"), "dlock-test:RedisFixture.UniqueKeyNamesTheTest:lock");
  EXPECT_NE(unique_key("a"), unique_key("b"));
}

TEST(RedisFixture, PassingTestRemovesServerFiles) {
  std::string dir;
  {
    redis_server server;
    dir = server.dir();
    ASSERT_TRUE(fs::is_directory(dir));
  }
  EXPECT_FALSE(fs::exists(dir));
}

TEST(RedisFixture, ExceptionKeepsServerFiles) {
  std::string dir;
  try {
    redis_server server;
    dir = server.dir();
    throw std::runtime_error("unwinding through the server");
  } catch (const std::runtime_error&) {
  }
  ASSERT_FALSE(dir.empty());
  EXPECT_TRUE(fs::is_directory(dir));
  fs::remove_all(dir);
}

}  // namespace
