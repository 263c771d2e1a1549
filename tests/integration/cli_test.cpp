// The dlock command (tools/dlock) as a user runs it: real processes against a real redis-server.
// `dlock exec` exclusion across processes, conflict exit codes and their timing, the command's
// environment, signal forwarding, a lost lock killing the command, Redis and usage errors,
// `status --json`, `unlock --force` waking a waiter, and the demos.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "dlock/dlock.hpp"
#include "redis_process.hpp"
#include "support/redis_fixture.hpp"

extern char** environ;  // NOLINT: POSIX declares it nowhere else

namespace dlock {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using test::redis_server;
using test::unique_key;
namespace fs = std::filesystem;

// Slack for timing assertions on a loaded 2-core CI machine: it covers starting a dlock process,
// connecting to Redis and scheduling delays, for several processes at once.
constexpr auto process_slack = 1500ms;
// How long a step that should take milliseconds may take before the test gives up on it.
constexpr auto step_limit = 15s;
// The only polling here: how often the tests ask Redis whether a dlock process is waiting yet
// (lock_status::subscribers: PUBSUB NUMSUB of its channels), up to step_limit. Nothing else
// announces it.
constexpr auto status_poll_interval = 10ms;

const std::string cli = DLOCK_CLI;

// A temporary directory, removed with its contents on destruction.
class temp_dir {
 public:
  temp_dir() {
    std::string pattern = (fs::temp_directory_path() / "dlock-cli-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~temp_dir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A dlock process with its stdin and stdout on pipes and its stderr in a file. Killed and reaped
// on destruction if still running.
class cli_process {
 public:
  // `detached`: in a new session, without a controlling terminal, as under cron, also when the
  // tests run in a terminal.
  // `wrapper`: a program line that starts dlock (its path and `args` follow), such as a shell.
  explicit cli_process(std::vector<std::string> args, std::vector<std::string> env_overrides = {},
                       bool detached = false, const std::vector<std::string>& wrapper = {})
      : err_path_(dir_ / "stderr") {
    args.insert(args.begin(), cli);
    args.insert(args.begin(), wrapper.begin(), wrapper.end());
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry(*e);
      const bool overridden = std::any_of(env_overrides.begin(), env_overrides.end(), [&](auto& o) {
        return entry.substr(0, entry.find('=') + 1) == o.substr(0, o.find('=') + 1);
      });
      if (!overridden) env.push_back(entry);
    }
    env.insert(env.end(), env_overrides.begin(), env_overrides.end());
    std::vector<char*> argv, envp;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env)
      envp.push_back(e.data());
    envp.push_back(nullptr);

    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
      throw std::runtime_error("pipe2 failed");
    }
    posix_spawn_file_actions_t actions;
    ::posix_spawn_file_actions_init(&actions);
    ::posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
    ::posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    ::posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path_.c_str(),
                                       O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawnattr_t attr;
    ::posix_spawnattr_init(&attr);
    if (detached) ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    const int rc = ::posix_spawn(&pid_, argv[0], &actions, &attr, argv.data(), envp.data());
    ::posix_spawnattr_destroy(&attr);
    ::posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
    if (rc != 0) {
      pid_ = -1;
      throw std::runtime_error("cannot start " + cli);
    }
  }
  ~cli_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    close_stdin();
    ::close(from_);
  }
  cli_process(const cli_process&) = delete;
  cli_process& operator=(const cli_process&) = delete;

  // The next line on its stdout, or std::nullopt if none comes within `limit`.
  std::optional<std::string> read_line(milliseconds limit = step_limit) {
    const auto deadline = steady_clock::now() + limit;
    for (;;) {
      if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      const auto left = std::chrono::ceil<milliseconds>(deadline - steady_clock::now());
      pollfd p{from_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
        return std::nullopt;
      }
      char chunk[512];
      const ssize_t got = ::read(from_, chunk, sizeof chunk);
      if (got <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<std::size_t>(got));
    }
  }

  void close_stdin() {
    if (to_ >= 0) ::close(to_);
    to_ = -1;
  }
  void signal(int sig) const { ::kill(pid_, sig); }

  // Its exit code (128 + signal if killed), or std::nullopt if it still runs after `limit`.
  std::optional<int> wait(milliseconds limit = step_limit) {
    // glibc 2.36's <sys/pidfd.h> lacks extern "C" for C++; the system call is the same.
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
    if (pidfd < 0) throw std::runtime_error("pidfd_open failed");
    pollfd p{pidfd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(limit.count()));
    ::close(pidfd);
    if (ready <= 0) return std::nullopt;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // What it wrote to stderr so far.
  std::string err() const { return read_file(err_path_); }

 private:
  temp_dir dir_;
  std::string err_path_;
  pid_t pid_ = -1;
  int to_ = -1;
  int from_ = -1;
  std::string buffer_;
};

// `dlock --redis URL args...` to completion.
tools::command_result run_cli(const std::string& url, std::vector<std::string> args,
                              milliseconds limit = step_limit) {
  args.insert(args.begin(), {cli, "--redis", url});
  return tools::run_command(args, limit);
}

template <typename F>
milliseconds time_of(F&& f) {
  const auto start = steady_clock::now();
  f();
  return std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
}

// Polls `done` every status_poll_interval until it is true or `limit` passed.
bool eventually(const std::function<bool()>& done, milliseconds limit = step_limit) {
  const auto deadline = steady_clock::now() + limit;
  while (!done()) {
    if (steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(status_poll_interval);
  }
  return true;
}

// Whether process `pid` runs: it exists and is not a zombie (an orphan's zombie may wait a while
// for whoever adopted it to reap it).
bool alive(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return false;  // gone
  const char state = stat[paren + 2];
  return state != 'Z' && state != 'X';
}

// --- a small JSON reader, enough to check `dlock status --json` -------------------------------

struct json {
  enum class kind { null, boolean, number, string, array, object } type = kind::null;
  bool boolean = false;
  std::string text;               // a string's value, or a number's digits
  std::vector<json> items;        // an array's elements, or an object's member values
  std::vector<std::string> keys;  // an object's member names, in the order of `items`

  const json& operator[](const std::string& key) const {
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == key) return items[i];
    }
    throw std::runtime_error("no member " + key);
  }
  std::int64_t integer() const {
    std::int64_t v = 0;
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (type != kind::number || ec != std::errc() || p != text.data() + text.size()) {
      throw std::runtime_error("not an integer: " + text);
    }
    return v;
  }
};

// Parses one JSON value covering all of `in` (RFC 8259); throws std::runtime_error otherwise.
class json_reader {
 public:
  static json parse(std::string_view in) {
    json_reader r(in);
    json v = r.value();
    r.skip_space();
    if (r.pos_ != in.size()) r.fail("trailing text");
    return v;
  }

 private:
  explicit json_reader(std::string_view in) : in_(in) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("bad JSON at " + std::to_string(pos_) + ": " + what);
  }
  void skip_space() {
    while (pos_ < in_.size() && std::string_view(" \t\r\n").find(in_[pos_]) != std::string::npos)
      ++pos_;
  }
  char peek() {
    skip_space();
    if (pos_ >= in_.size()) fail("unexpected end");
    return in_[pos_];
  }
  void expect(std::string_view word) {
    if (in_.substr(pos_, word.size()) != word) fail("expected " + std::string(word));
    pos_ += word.size();
  }

  json value() {
    json v;
    const char c = peek();
    if (c == '{') {
      v.type = json::kind::object;
      ++pos_;
      if (peek() == '}') {
        ++pos_;
        return v;
      }
      for (;;) {
        if (peek() != '"') fail("expected a member name");
        std::string key = string();
        if (peek() != ':') fail("expected ':'");
        ++pos_;
        v.keys.push_back(std::move(key));
        v.items.push_back(value());
        const char next = peek();
        ++pos_;
        if (next == '}') return v;
        if (next != ',') fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.type = json::kind::array;
      ++pos_;
      if (peek() == ']') {
        ++pos_;
        return v;
      }
      for (;;) {
        v.items.push_back(value());
        const char next = peek();
        ++pos_;
        if (next == ']') return v;
        if (next != ',') fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.type = json::kind::string;
      v.text = string();
      return v;
    }
    if (c == 't' || c == 'f') {
      v.type = json::kind::boolean;
      v.boolean = c == 't';
      expect(v.boolean ? "true" : "false");
      return v;
    }
    if (c == 'n') {
      expect("null");
      return v;
    }
    v.type = json::kind::number;
    const std::size_t start = pos_;
    if (in_[pos_] == '-') ++pos_;
    while (pos_ < in_.size() &&
           std::string_view("0123456789.eE+-").find(in_[pos_]) != std::string::npos)
      ++pos_;
    v.text = std::string(in_.substr(start, pos_ - start));
    if (v.text.empty() || v.text == "-") fail("expected a value");
    return v;
  }

  static void append_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::uint32_t hex4() {
    if (pos_ + 4 > in_.size()) fail("short \\u escape");
    std::uint32_t v = 0;
    const auto [p, ec] = std::from_chars(in_.data() + pos_, in_.data() + pos_ + 4, v, 16);
    if (ec != std::errc() || p != in_.data() + pos_ + 4) fail("bad \\u escape");
    pos_ += 4;
    return v;
  }

  std::string string() {
    ++pos_;  // the opening quote
    std::string out;
    for (;;) {
      if (pos_ >= in_.size()) fail("unterminated string");
      const auto c = static_cast<unsigned char>(in_[pos_++]);
      if (c == '"') return out;
      if (c < 0x20) fail("raw control character in a string");
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (pos_ >= in_.size()) fail("unterminated escape");
      const char e = in_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          std::uint32_t cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            expect("\\u");
            const std::uint32_t low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail("unknown escape");
      }
    }
  }

  std::string_view in_;
  std::size_t pos_ = 0;
};

json status_json(const std::string& url, const std::string& name) {
  const tools::command_result r = run_cli(url, {"status", "--json", name});
  if (r.exit_code != 0) throw std::runtime_error("dlock status failed: " + r.err);
  return json_reader::parse(r.out);
}

// "key=value key=value" of a demo's "result:" line.
std::map<std::string, std::string> result_line(const std::string& out) {
  std::map<std::string, std::string> fields;
  const auto at = out.find("\nresult: ");
  if (at == std::string::npos) return fields;
  std::istringstream line(out.substr(at + 9, out.find('\n', at + 1) - at - 9));
  std::string field;
  while (line >> field) {
    const auto eq = field.find('=');
    if (eq != std::string::npos) fields[field.substr(0, eq)] = field.substr(eq + 1);
  }
  return fields;
}

// --- dlock exec ----------------------------------------------------------------------------------

TEST(CliExec, ConcurrentInvocationsNeverOverlapAndTokensIncrease) {
  redis_server server;
  temp_dir dir;
  const std::string name = unique_key("job"), stamps = dir / "stamps";
  // Each command appends "start <token>", works briefly, then appends "end <token>". O_APPEND
  // writes land in the order they happen, so the file is the timeline of all commands.
  const std::string script = "echo \"start $DLOCK_TOKEN\" >> '" + stamps +
                             "'; sleep 0.02; echo \"end $DLOCK_TOKEN\" >> '" + stamps + "'";
  constexpr int processes = 4, runs = 3;
  std::vector<std::future<std::vector<tools::command_result>>> invokers;
  for (int p = 0; p < processes; ++p) {
    invokers.push_back(std::async(std::launch::async, [&] {
      std::vector<tools::command_result> results;
      for (int r = 0; r < runs; ++r)
        results.push_back(run_cli(server.url(), {"exec", name, "--", "sh", "-c", script}));
      return results;
    }));
  }
  for (auto& f : invokers) {
    for (const auto& r : f.get())
      EXPECT_EQ(r.exit_code, 0) << r.err;
  }

  std::istringstream timeline(read_file(stamps));
  std::string what;
  std::uint64_t token = 0, open = 0, last = 0;
  int starts = 0, overlaps = 0, not_increasing = 0;
  while (timeline >> what >> token) {
    if (what == "start") {
      ++starts;
      if (open != 0) ++overlaps;  // another command had not ended yet
      if (token <= last) ++not_increasing;
      open = token;
      last = token;
    } else {
      if (token != open) ++overlaps;
      open = 0;
    }
  }
  EXPECT_EQ(starts, processes * runs);
  EXPECT_EQ(overlaps, 0) << read_file(stamps);
  EXPECT_EQ(not_increasing, 0) << read_file(stamps);
}

TEST(CliExec, NonblockAndWaitGiveTheConflictExitCode) {
  redis_server server;
  temp_dir dir;
  const std::string name = unique_key("held"), marker = dir / "ran";
  client c{server.url()};
  mutex m = c.get_lock(name);
  m.lock();

  tools::command_result r;
  const milliseconds nonblock_took = time_of([&] {
    r = run_cli(server.url(), {"exec", "-n", name, "--", "touch", marker});
  });
  EXPECT_EQ(r.exit_code, 75) << r.err;
  EXPECT_NE(r.err.find("held"), std::string::npos) << r.err;
  EXPECT_LT(nonblock_took, process_slack) << "-n must not wait";

  r = run_cli(server.url(), {"exec", "-n", "-E", "3", name, "--", "touch", marker});
  EXPECT_EQ(r.exit_code, 3) << r.err;

  const milliseconds wait = 300ms;
  const milliseconds wait_took = time_of([&] {
    r = run_cli(server.url(), {"exec", "-w", "0.3", name, "--", "touch", marker});
  });
  EXPECT_EQ(r.exit_code, 75) << r.err;
  EXPECT_GE(wait_took, wait);
  EXPECT_LT(wait_took, wait + process_slack);
  EXPECT_FALSE(fs::exists(marker)) << "the command ran without the lock";

  m.unlock();
  r = run_cli(server.url(), {"exec", "-n", name, "--", "touch", marker});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(marker));
}

// Without "--", the command's own options stayed dlock's: `dlock exec x ls -w 5` waited 5 s and
// ran `ls`. Everything after NAME is the command's now; options put between NAME and "--" are a
// usage error naming the first.
TEST(CliExec, EverythingAfterTheNameIsTheCommands) {
  redis_server server;
  const std::string name = unique_key("args");
  const tools::command_result r = run_cli(
      server.url(), {"exec", name, "sh", "-c", R"(printf '%s|' "$@")", "sh", "-n", "-w", "5"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "-n|-w|5|");
  const tools::command_result marked =
      run_cli(server.url(), {"exec", name, "--", "sh", "-c", R"(printf '%s|' "$@")", "sh", "--"});
  EXPECT_EQ(marked.exit_code, 0) << marked.err;
  EXPECT_EQ(marked.out, "--|") << "only the first -- is dlock's";
  const tools::command_result misplaced = run_cli(server.url(), {"exec", name, "-n", "--", "true"});
  EXPECT_EQ(misplaced.exit_code, 64) << misplaced.err;
  EXPECT_NE(misplaced.err.find("options go before NAME ('-n' follows it)"), std::string::npos)
      << misplaced.err;
}

TEST(CliExec, TheCommandSeesNameTokenAndOwnerAndItsExitCodeIsDlocks) {
  redis_server server;
  const std::string name = unique_key("env");
  const std::vector<std::string> args{
      "--redis", server.url(),
      "exec",    name,
      "--",      "sh",
      "-c",      R"(printf '%s|%s|%s\n' "$DLOCK_NAME" "$DLOCK_TOKEN" "$DLOCK_OWNER"; exit 7)"};
  std::vector<std::string> lines;
  for (int run = 0; run < 2; ++run) {
    // Stale values in dlock's own environment must not reach the command.
    cli_process p(args, {"DLOCK_TOKEN=999999", "DLOCK_OWNER=stale", "DLOCK_NAME=stale"});
    const auto line = p.read_line();
    ASSERT_TRUE(line) << p.err();
    lines.push_back(*line);
    EXPECT_EQ(p.wait(), 7) << p.err();
  }
  std::vector<std::uint64_t> tokens;
  std::vector<std::string> owners;
  for (const std::string& line : lines) {
    const auto first = line.find('|'), second = line.find('|', first + 1);
    ASSERT_NE(second, std::string::npos) << line;
    EXPECT_EQ(line.substr(0, first), name);
    tokens.push_back(std::stoull(line.substr(first + 1, second - first - 1)));
    owners.push_back(line.substr(second + 1));
  }
  EXPECT_GT(tokens[0], 0u);
  EXPECT_GT(tokens[1], tokens[0]) << "fencing tokens must increase across runs";
  for (const std::string& owner : owners) {
    EXPECT_NE(owner, "stale");
    EXPECT_NE(owner.find(':'), std::string::npos) << owner << " is not '<client id>:<thread>'";
  }
  EXPECT_NE(owners[0], owners[1]) << "each dlock process is its own client";
  client c{server.url()};
  EXPECT_EQ(c.get_lock(name).status().last_fencing_token, tokens[1]);
}

TEST(CliExec, SigtermReachesTheCommandAndTheLockIsReleasedOnlyAfterItExits) {
  redis_server server;
  const std::string name = unique_key("term");
  // On SIGTERM the command reports, looks at its own lock with `dlock status`, and exits 42.
  const std::string script = "trap 'echo got-term; \"" + cli + "\" --redis " + server.url() +
                             " status --json \"$DLOCK_NAME\"; exit 42' TERM; echo ready; "
                             "sleep 30 & wait $!";
  cli_process p({"--redis", server.url(), "exec", name, "--", "sh", "-c", script});
  ASSERT_EQ(p.read_line(), "ready") << p.err();
  p.signal(SIGTERM);
  EXPECT_EQ(p.read_line(), "got-term") << p.err();
  const auto during = p.read_line();
  ASSERT_TRUE(during) << p.err();
  const json inside = json_reader::parse(*during);
  EXPECT_TRUE(inside["locked"].boolean) << "the lock was released before the command exited";
  EXPECT_EQ(inside["holders"].items.size(), 1u);
  EXPECT_EQ(p.wait(), 42) << "dlock exits with the command's code; " << p.err();
  EXPECT_FALSE(status_json(server.url(), name)["locked"].boolean);
}

TEST(CliExec, ASignalWhileWaitingEndsDlockWithoutRunningTheCommand) {
  redis_server server;
  temp_dir dir;
  const std::string name = unique_key("wait"), marker = dir / "ran";
  client c{server.url()};
  mutex m = c.get_lock(name);
  m.lock();
  cli_process p({"--redis", server.url(), "exec", name, "--", "touch", marker});
  // Waiting means subscribed to the lock's unlock channel: the holder is us, so one subscriber.
  ASSERT_TRUE(eventually([&] { return m.status().subscribers == 1; })) << p.err();
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(process_slack), 128 + SIGTERM) << p.err();
  EXPECT_NE(p.err().find("SIGTERM"), std::string::npos) << p.err();
  EXPECT_FALSE(fs::exists(marker));
  // The cancelled wait took nothing: the newest token is still ours.
  EXPECT_EQ(m.status().last_fencing_token, m.fencing_token());
  m.unlock();
  EXPECT_FALSE(m.status().locked);
}

// Signals ignored by whoever started dlock (nohup; a background job of a non-interactive shell
// ignores SIGINT) stay ignored: they neither end the wait nor are handled later.
TEST(CliExec, SignalsIgnoredByWhoStartedDlockStayIgnoredAsUnderNohup) {
  redis_server server;
  temp_dir dir;
  const std::string name = unique_key("nohup"), marker = dir / "ran";
  client c{server.url()};
  mutex m = c.get_lock(name);
  m.lock();
  cli_process p({"--redis", server.url(), "exec", name, "--", "touch", marker}, {}, false,
                {"/bin/sh", "-c", "trap '' HUP INT; exec \"$0\" \"$@\""});
  ASSERT_TRUE(eventually([&] { return m.status().subscribers == 1; })) << p.err();
  p.signal(SIGHUP);  // discarded by the kernel before kill() returns: ignored, not blocked
  p.signal(SIGINT);
  m.unlock();
  EXPECT_EQ(p.wait(process_slack), 0) << p.err();
  EXPECT_TRUE(fs::exists(marker)) << "an ignored signal ended the wait";
}

TEST(CliExec, ALockDeletedBehindItsBackGetsTheCommandKilledAndExit70) {
  redis_server server;
  const std::string name = unique_key("deleted");
  const milliseconds watchdog = 1s, grace = 500ms;
  // The command ignores SIGTERM, so only the SIGKILL after the grace period ends it.
  cli_process p({"--redis", server.url(), "exec", "--watchdog", "1", "--kill-grace", "0.5", name,
                 "--", "sh", "-c", "trap '' TERM; echo ready; exec sleep 30"});
  ASSERT_EQ(p.read_line(), "ready") << p.err();
  client c{server.url()};
  std::optional<int> code;
  const milliseconds took = time_of([&] {
    ASSERT_EQ(c.command({"DEL", name}).integer, 1);
    code = p.wait(watchdog / 3 + grace + process_slack);
  });
  EXPECT_EQ(code, 70) << p.err();
  EXPECT_GE(took, grace) << "SIGKILL came before the grace period ended";
  EXPECT_LE(took, watchdog / 3 + grace + process_slack);
  EXPECT_NE(p.err().find("lost lock"), std::string::npos) << p.err();
  EXPECT_NE(p.err().find("SIGKILL"), std::string::npos) << p.err();
}

TEST(CliExec, ALostLockStopsACooperativeCommandWithSigtermFirst) {
  redis_server server;
  const std::string name = unique_key("lost");
  const milliseconds watchdog = 1s;
  cli_process p({"--redis", server.url(), "exec", "--watchdog", "1", name, "--", "sh", "-c",
                 "trap 'echo got-term; exit 0' TERM; echo ready; sleep 30 & wait $!"});
  ASSERT_EQ(p.read_line(), "ready") << p.err();
  client c{server.url()};
  std::optional<int> code;
  const milliseconds took = time_of([&] {
    ASSERT_EQ(c.command({"DEL", name}).integer, 1);
    EXPECT_EQ(p.read_line(watchdog / 3 + process_slack), "got-term") << p.err();
    code = p.wait(process_slack);
  });
  EXPECT_EQ(code, 70) << "a clean exit after losing the lock is still a lost lock; " << p.err();
  EXPECT_LT(took, watchdog / 3 + process_slack) << "well before the default 5 s grace";
}

// Found with the hardening of unlock --force: a lock overwritten with other data while the
// command ran was taken for still held (status now says errc::wrong_type), and dlock exited 0.
TEST(CliExec, ALockOverwrittenWithDataWhileTheCommandRunsGives70AndTheDataStays) {
  redis_server server;
  const std::string name = unique_key("overwritten");
  cli_process p(
      {"--redis", server.url(), "exec", name, "--", "sh", "-c", "echo ready; read line; exit 0"});
  ASSERT_EQ(p.read_line(), "ready") << p.err();
  client c{server.url()};
  c.command({"SET", name, "data"});
  p.close_stdin();  // the command exits 0
  EXPECT_EQ(p.wait(), 70) << p.err();
  EXPECT_NE(p.err().find("lost lock"), std::string::npos) << p.err();
  EXPECT_EQ(c.command({"GET", name}).str, "data") << "the release deleted someone's data";
}

// Hardening: kill -9 of dlock (or an OOM kill) left its command running with no lock and no
// renewal, and a second exec on the same name ran beside it. The command and what it started
// (its process group) must die with dlock, which runs no code after SIGKILL.
TEST(CliExec, TheCommandAndWhatItStartedDieWithAKilledDlock) {
  redis_server server;
  const std::string name = unique_key("orphan");
  const milliseconds watchdog = 1s;
  // The command (sh) starts a grandchild (sleep) and prints both pids.
  cli_process p({"--redis", server.url(), "exec", "--watchdog", "1", name, "--", "sh", "-c",
                 "sleep 30 & echo $$ $!; wait"},
                {}, true);
  const auto line = p.read_line();
  ASSERT_TRUE(line) << p.err();
  pid_t command = 0, grandchild = 0;
  std::istringstream(*line) >> command >> grandchild;
  ASSERT_GT(command, 0) << *line;
  ASSERT_GT(grandchild, 0) << *line;
  ASSERT_TRUE(alive(command) && alive(grandchild));

  p.signal(SIGKILL);
  EXPECT_EQ(p.wait(), 128 + SIGKILL);
  EXPECT_TRUE(eventually([&] { return !alive(command) && !alive(grandchild); }, process_slack))
      << "still running: command " << alive(command) << ", grandchild " << alive(grandchild);
  // The dead dlock's lock frees itself within its watchdog lease; a second exec then takes it.
  const tools::command_result r =
      run_cli(server.url(), {"exec", "-w", "5", name, "--", "true"}, watchdog + step_limit);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const pid_t pid : {command, grandchild}) {  // after a failure: no strays for 30 s
    if (alive(pid)) ::kill(pid, SIGKILL);
  }
}

// The command itself also dies with dlock when it has left the process group (the kernel's
// parent-death signal, not the group's guard).
TEST(CliExec, ACommandThatLeftItsProcessGroupStillDiesWithAKilledDlock) {
  redis_server server;
  const std::string name = unique_key("escaped");
  // It moves to a process group of its own, then becomes `sleep` (the same process).
  const std::string leave_group =
      "import os; os.setpgid(0, 0); print(os.getpid(), flush=True); "
      "os.execvp('sleep', ['sleep', '30'])";
  cli_process p(
      {"--redis", server.url(), "exec", name, "--", "/usr/bin/python3", "-c", leave_group}, {},
      true);
  const auto line = p.read_line();
  ASSERT_TRUE(line) << p.err();
  const pid_t command = std::stoi(*line);
  ASSERT_TRUE(alive(command));
  p.signal(SIGKILL);
  EXPECT_EQ(p.wait(), 128 + SIGKILL);
  EXPECT_TRUE(eventually([&] { return !alive(command); }, process_slack));
  if (alive(command)) ::kill(command, SIGKILL);
}

// The other side of the previous test: the command's process group dies with dlock, not with a
// normal end. A background job the command left behind keeps running then, as documented.
TEST(CliExec, ABackgroundJobLeftBehindOutlivesANormalEnd) {
  redis_server server;
  const std::string name = unique_key("leftover");
  cli_process p({"--redis", server.url(), "exec", name, "--", "sh", "-c",
                 "sleep 30 >/dev/null 2>&1 & echo $!"},
                {}, true);
  const auto line = p.read_line();
  ASSERT_TRUE(line) << p.err();
  const pid_t job = std::stoi(*line);
  EXPECT_EQ(p.wait(), 0) << p.err();
  // A kill of the group after dlock's end would come at once: give it a moment to show.
  EXPECT_FALSE(eventually([&] { return !alive(job); }, 300ms)) << "the job was killed";
  if (alive(job)) ::kill(job, SIGKILL);
}

TEST(CliExec, AnExplicitLeaseThatRunsOutStopsTheCommand) {
  redis_server server;
  const std::string name = unique_key("lease");
  const milliseconds lease = 500ms;
  tools::command_result r;
  const milliseconds took = time_of([&] {
    r = run_cli(server.url(), {"exec", "--lease", "0.5", name, "--", "sleep", "30"});
  });
  EXPECT_EQ(r.exit_code, 70) << r.err;
  EXPECT_NE(r.err.find("--lease"), std::string::npos) << r.err;
  // Reported lost a tenth of the lease early (the library's safety margin).
  EXPECT_GE(took, lease * 9 / 10);
  EXPECT_LT(took, lease + process_slack);
}

TEST(CliExec, CommandNotFoundGives127AndNotExecutableGives126) {
  redis_server server;
  temp_dir dir;
  const std::string name = unique_key("missing"), not_executable = dir / "script";
  std::ofstream(not_executable) << "#!/bin/sh\necho hi\n";
  ::chmod(not_executable.c_str(), 0644);

  auto r = run_cli(server.url(), {"exec", name, "--", "dlock-test-no-such-command"});
  EXPECT_EQ(r.exit_code, 127) << r.err;
  EXPECT_NE(r.err.find("not found"), std::string::npos) << r.err;
  r = run_cli(server.url(), {"exec", name, "--", dir / "no-such-file"});
  EXPECT_EQ(r.exit_code, 127) << r.err;
  r = run_cli(server.url(), {"exec", name, "--", not_executable});
  EXPECT_EQ(r.exit_code, 126) << r.err;
  EXPECT_FALSE(status_json(server.url(), name)["locked"].boolean) << "the lock was kept";
}

// Review finding: started with SIGCHLD ignored (a parent's choice that survives exec), dlock never
// saw the command end and kept the lock.
TEST(CliExec, AnIgnoredSigchldInheritedByDlockDoesNotHideTheCommandsEnd) {
  redis_server server;
  const std::string name = unique_key("chld");
  // (sh cannot ignore SIGCHLD for the programs it starts; python can.)
  const std::string start_ignoring =
      "import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); "
      "os.execv(sys.argv[1], sys.argv[1:])";
  const auto r = tools::run_command({"/usr/bin/python3", "-c", start_ignoring, cli, "--redis",
                                     server.url(), "exec", name, "--", "sh", "-c", "exit 3"},
                                    step_limit);
  EXPECT_FALSE(r.timed_out) << "dlock waited for a command that had ended";
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_FALSE(status_json(server.url(), name)["locked"].boolean);
}

// --- errors ------------------------------------------------------------------------------------

TEST(CliErrors, AnUnreachableServerGives69AndSaysWhy) {
  const std::string url = "redis://127.0.0.1:" + std::to_string(tools::find_free_port());
  temp_dir dir;
  const std::string marker = dir / "ran";
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"exec", "job", "--", "touch", marker},
                                             {"status", "job"},
                                             {"unlock", "--force", "job"},
                                             {"ping"}}) {
    const tools::command_result r = run_cli(url, args);
    EXPECT_EQ(r.exit_code, 69) << args.front() << ": " << r.err;
    EXPECT_NE(r.err.find("Connection refused"), std::string::npos) << args.front() << ": " << r.err;
    EXPECT_TRUE(r.err.ends_with("\n")) << r.err;
  }
  EXPECT_FALSE(fs::exists(marker));
}

TEST(CliErrors, AWrongPasswordGives69) {
  tools::redis_process_options o;
  o.password = "s3cret";
  redis_server server{o};
  const std::string wrong = "redis://:wrong@127.0.0.1:" + std::to_string(server.port());
  const std::string name = unique_key("auth");
  auto r = run_cli(wrong, {"exec", name, "--", "true"});
  EXPECT_EQ(r.exit_code, 69) << r.err;
  EXPECT_NE(r.err.find("authentication"), std::string::npos) << r.err;
  EXPECT_EQ(run_cli(wrong, {"status", name}).exit_code, 69);
  // The right password works, so 69 was about the password.
  EXPECT_EQ(run_cli(server.url(), {"exec", name, "--", "true"}).exit_code, 0);
}

// Hardening: exec printed "server error" for an ACL refusal, without the server's NOPERM text.
TEST(CliErrors, AnAclRefusalCarriesTheServersMessage) {
  redis_server server;
  client admin{server.url()};
  // Every command but scripts, which the locks run.
  admin.command({"ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "&*", "+@all", "-@scripting"});
  const std::string url = "redis://noscripts:pw@127.0.0.1:" + std::to_string(server.port());
  temp_dir dir;
  const std::string name = unique_key("acl"), marker = dir / "ran";
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"exec", "-n", name, "--", "touch", marker},
                                             {"exec", "-w", "1", name, "--", "touch", marker},
                                             {"status", name},
                                             {"unlock", "--force", name}}) {
    const tools::command_result r = run_cli(url, args);
    EXPECT_EQ(r.exit_code, 69) << args.front() << ": " << r.err;
    EXPECT_NE(r.err.find("NOPERM"), std::string::npos) << args.front() << ": " << r.err;
    EXPECT_TRUE(r.err.ends_with("\n")) << r.err;
  }
  EXPECT_FALSE(fs::exists(marker));
}

// Hardening: a server that went away while exec waited gave "cannot connect to Redis" without
// the system's reason.
TEST(CliErrors, AServerGoneWhileWaitingGivesTheSystemsReason) {
  redis_server server;
  temp_dir dir;
  const std::string name = unique_key("gone"), marker = dir / "ran";
  client c{server.url()};
  mutex m = c.get_lock(name);
  m.lock();
  const milliseconds wait = 2s;
  cli_process waiter({"--redis", server.url(), "exec", "-w", "2", name, "--", "touch", marker});
  ASSERT_TRUE(eventually([&] { return m.status().subscribers == 1; })) << waiter.err();
  server.kill(SIGKILL);
  ASSERT_TRUE(server.wait_exit(step_limit));
  EXPECT_EQ(waiter.wait(wait + process_slack), 69) << waiter.err();
  const std::string err = waiter.err();
  // The waiter re-checks when the link drops: it meets the closed port, the dying server's
  // reset, or a dying server that still took the new connection and closed it, and says which.
  EXPECT_TRUE(err.find("Connection refused") != std::string::npos ||
              err.find("Connection reset by peer") != std::string::npos ||
              err.find("server closed the connection") != std::string::npos)
      << err;
  EXPECT_TRUE(err.ends_with("\n")) << err;
  EXPECT_FALSE(fs::exists(marker));
}

TEST(CliErrors, BadUsageGives64AndRunsNothing) {
  temp_dir dir;
  const std::string marker = dir / "ran";
  const std::vector<std::vector<std::string>> cases{
      {},
      {"frobnicate"},
      {"exec", "job"},
      {"exec", "-n", "-w", "1", "job", "--", "touch", marker},
      {"exec", "--lease", "5", "--watchdog", "3", "job", "--", "touch", marker},
      {"exec", "-w", "-1", "job", "--", "touch", marker},
      {"exec", "-w", "0", "job", "--", "touch", marker},
      {"exec", "-w", "soon", "job", "--", "touch", marker},
      {"exec", "--lease", "0", "job", "--", "touch", marker},
      {"exec", "--watchdog", "nan", "job", "--", "touch", marker},
      {"exec", "--kill-grace", "-1", "job", "--", "touch", marker},
      {"exec", "-E", "256", "job", "--", "touch", marker},
      {"exec", "-E", "x", "job", "--", "touch", marker},
      {"exec", "--no-such-option", "job", "--", "touch", marker},
      {"--redis", "redis://127.0.0.1:notaport", "exec", "job", "--", "touch", marker},
      {"exec", "", "--", "touch", marker},
      {"status"},
      {"unlock", "job"},
      {"demo"},
      {"demo", "flash-sale", "--buyers", "1"},
      {"exec", "--semaphore", "-1", "job", "--", "touch", marker},
      {"exec", "--semaphore", "9007199254740992", "job", "--", "touch", marker},
      {"latch", "set", "job", "2.5"},
  };
  for (const auto& args : cases) {
    std::vector<std::string> argv{cli};
    argv.insert(argv.end(), args.begin(), args.end());
    const tools::command_result r = tools::run_command(argv, step_limit);
    std::string shown;
    for (const auto& a : args)
      shown += " '" + a + "'";
    EXPECT_EQ(r.exit_code, 64) << "dlock" << shown << ": " << r.err;
    EXPECT_FALSE(r.err.empty()) << "dlock" << shown << " said nothing on stderr";
    // Every message, the parser's too, says who speaks and stays short (no 300-digit bound).
    EXPECT_TRUE(r.err.starts_with("dlock: ") || r.err.starts_with("Usage:")) << r.err;
    EXPECT_EQ(r.err.find("179769313"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(marker)) << "a rejected command line ran its command";
  const tools::command_result unknown = tools::run_command({cli, "frobnicate"}, step_limit);
  EXPECT_NE(unknown.err.find("unknown command 'frobnicate'"), std::string::npos) << unknown.err;
}

// Hardening: a name was echoed whole in every message, 70,000 bytes of it on stderr.
TEST(CliErrors, LongNamesAreCutInMessagesWithTheirLength) {
  redis_server server;
  constexpr std::size_t message_limit = 1000;
  // Over the library's 64 KiB limit: refused before any I/O, as a usage error.
  const std::string huge(70000, 'n');
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"exec", "-n", huge, "--", "true"}, {"status", huge}, {"unlock", "--force", huge}}) {
    const tools::command_result r = run_cli(server.url(), args);
    EXPECT_EQ(r.exit_code, 64) << args.front() << ": " << r.err.substr(0, message_limit);
    EXPECT_LT(r.err.size(), message_limit) << args.front();
    EXPECT_NE(r.err.find("70000 bytes"), std::string::npos) << r.err.substr(0, message_limit);
    EXPECT_TRUE(r.err.ends_with("\n")) << r.err.substr(0, message_limit);
  }
  // A duration option's text is echoed the same way.
  const tools::command_result bad_wait =
      run_cli(server.url(), {"exec", "-w", std::string(70000, '9') + "x", "job", "--", "true"});
  EXPECT_EQ(bad_wait.exit_code, 64) << bad_wait.err.substr(0, message_limit);
  EXPECT_LT(bad_wait.err.size(), message_limit);
  EXPECT_NE(bad_wait.err.find("70001 bytes"), std::string::npos)
      << bad_wait.err.substr(0, message_limit);
  // Within the limit, held by someone else: the conflict message names it cut too.
  const std::string long_name = unique_key(std::string(5000, 'x'));
  client c{server.url()};
  mutex m = c.get_lock(long_name);
  m.lock();
  const tools::command_result r = run_cli(server.url(), {"exec", "-n", long_name, "--", "true"});
  EXPECT_EQ(r.exit_code, 75) << r.err.substr(0, message_limit);
  EXPECT_LT(r.err.size(), message_limit);
  EXPECT_NE(r.err.find(std::to_string(long_name.size()) + " bytes"), std::string::npos)
      << r.err.substr(0, message_limit);
  m.unlock();
}

TEST(CliErrors, HelpWorksEverywhereAndVersionIsPrinted) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--help"},
                                             {"exec", "--help"},
                                             {"status", "--help"},
                                             {"unlock", "--help"},
                                             {"ping", "--help"},
                                             {"demo", "--help"},
                                             {"demo", "flash-sale", "--help"},
                                             {"demo", "reward", "--help"},
                                             {"demo", "smoke", "--help"}}) {
    std::vector<std::string> argv{cli};
    argv.insert(argv.end(), args.begin(), args.end());
    const tools::command_result r = tools::run_command(argv, step_limit);
    EXPECT_EQ(r.exit_code, 0) << args.front() << ": " << r.err;
    EXPECT_NE(r.out.find("Usage:"), std::string::npos) << r.out;
  }
  const tools::command_result v = tools::run_command({cli, "--version"}, step_limit);
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.out.rfind("dlock ", 0), 0u) << v.out;
}

// --- status and unlock ---------------------------------------------------------------------------

TEST(CliStatus, JsonDescribesAHeldLockAndThenAFreeOne) {
  redis_server server;
  // Quotes, a backslash and non-ASCII text in the name test the JSON escaping.
  const std::string name = unique_key("report \"q4\" \\ größe");
  const milliseconds watchdog = 3s;
  cli_process holder({"--redis", server.url(), "exec", "--watchdog", "3", name, "--", "sh", "-c",
                      R"(echo "$DLOCK_TOKEN $DLOCK_OWNER"; read line; exit 0)"});
  const auto line = holder.read_line();
  ASSERT_TRUE(line) << holder.err();
  const std::uint64_t token = std::stoull(line->substr(0, line->find(' ')));
  const std::string owner = line->substr(line->find(' ') + 1);

  const json held = status_json(server.url(), name);
  EXPECT_EQ(held["name"].text, name);
  EXPECT_TRUE(held["locked"].boolean);
  ASSERT_EQ(held["holders"].items.size(), 1u);
  EXPECT_EQ(held["holders"].items[0]["owner"].text, owner);
  EXPECT_EQ(held["holders"].items[0]["count"].integer(), 1);
  EXPECT_GT(held["remaining_ttl_ms"].integer(), 0);
  EXPECT_LE(held["remaining_ttl_ms"].integer(), watchdog.count());
  EXPECT_EQ(held["last_fencing_token"].integer(), static_cast<std::int64_t>(token));
  EXPECT_EQ(held["waiting_clients"].integer(), 0);

  const tools::command_result text = run_cli(server.url(), {"status", name});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find(": locked"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(owner), std::string::npos) << text.out;

  holder.close_stdin();  // the command's `read` returns; it exits 0
  EXPECT_EQ(holder.wait(), 0) << holder.err();
  const json freed = status_json(server.url(), name);
  EXPECT_FALSE(freed["locked"].boolean);
  EXPECT_TRUE(freed["holders"].items.empty());
  EXPECT_EQ(freed["remaining_ttl_ms"].integer(), -2);
  EXPECT_EQ(freed["last_fencing_token"].integer(), static_cast<std::int64_t>(token));
}

TEST(CliStatus, TheServerComesFromRedisOptionThenDlockRedisUrl) {
  redis_server server;
  const std::string name = unique_key("env");
  const std::string nowhere = "redis://127.0.0.1:" + std::to_string(tools::find_free_port());
  {
    cli_process p({"status", "--json", name}, {"DLOCK_REDIS_URL=" + server.url()});
    const auto line = p.read_line();
    ASSERT_TRUE(line) << p.err();
    EXPECT_EQ(json_reader::parse(*line)["name"].text, name);
    EXPECT_EQ(p.wait(), 0) << p.err();
  }
  {
    cli_process p({"--redis", server.url(), "status", name}, {"DLOCK_REDIS_URL=" + nowhere});
    EXPECT_EQ(p.wait(), 0) << "--redis must win over DLOCK_REDIS_URL; " << p.err();
  }
  {
    cli_process p({"status", name}, {"DLOCK_REDIS_URL=" + nowhere});
    EXPECT_EQ(p.wait(), 69) << p.err();
  }
}

TEST(CliUnlock, ForceFreesAHeldLockAndWakesAWaitingExec) {
  redis_server server;
  const std::string name = unique_key("stuck");
  client c{server.url()};
  mutex m = c.get_lock(name);
  m.lock();  // a 30 s watchdog lease: without unlock --force the waiter would wait 20 s
  cli_process waiter({"--redis", server.url(), "exec", "-w", "20", name, "--", "echo", "ran"});
  ASSERT_TRUE(eventually([&] { return m.status().subscribers == 1; })) << waiter.err();

  const auto forced_at = steady_clock::now();
  const tools::command_result r = run_cli(server.url(), {"unlock", "--force", name});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("released"), std::string::npos) << r.out;
  EXPECT_EQ(waiter.read_line(process_slack), "ran") << waiter.err();
  EXPECT_EQ(waiter.wait(process_slack), 0) << waiter.err();
  EXPECT_LT(steady_clock::now() - forced_at, process_slack);

  const tools::command_result again = run_cli(server.url(), {"unlock", "--force", name});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("not held"), std::string::npos) << again.out;
  m.unlock();
}

// Hardening: a key that holds data, not a lock. unlock --force must refuse it (exit 64, the key
// untouched) and say why; status must say it is not a lock rather than show it as one.
TEST(CliUnlock, ForceRefusesAKeyThatHoldsDataAndLeavesItUntouched) {
  redis_server server;
  client c{server.url()};
  const std::string text = unique_key("text"), record = unique_key("record"),
                    counters = unique_key("counters");
  c.command({"SET", text, "data"});
  c.command({"HSET", record, "name", "alice", "age", "30"});
  c.command({"HSET", counters, "views", "12"});  // numbers, like hold counts, in user fields
  std::vector<std::pair<std::string, std::string>> keys{
      {text, "holds a string"}, {record, "holds a hash"}, {counters, "holds a hash"}};
  // Owner-like fields whose values Lua's tonumber() reads as numbers but that are not the
  // decimal hold counts status accepts: data to both commands (unlock used to delete them).
  std::vector<std::string> near_counts;
  for (const char* count :
       {"5.5", "1e3", "0x10", "+5", " 5", "5 ", "inf", "000", "99999999999999999999"}) {
    near_counts.push_back(unique_key("near-count"));
    c.command({"HSET", near_counts.back(), "client:1", count});
    keys.emplace_back(near_counts.back(), "holds a hash");
  }
  for (const auto& [key, what] : keys) {
    const tools::command_result r = run_cli(server.url(), {"unlock", "--force", key});
    EXPECT_EQ(r.exit_code, 64) << key << ": " << r.out << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("refused"), std::string::npos) << r.err;
    EXPECT_TRUE(r.err.ends_with("\n")) << r.err;
    EXPECT_EQ(r.out.find("released"), std::string::npos) << r.out;
    for (const bool json : {false, true}) {
      const tools::command_result s =
          run_cli(server.url(), json ? std::vector<std::string>{"status", "--json", key}
                                     : std::vector<std::string>{"status", key});
      EXPECT_EQ(s.exit_code, 64) << key << ": " << s.out << s.err;
      EXPECT_NE(s.err.find(what), std::string::npos) << s.err;
      EXPECT_NE(s.err.find("not a"), std::string::npos) << s.err;
      EXPECT_TRUE(s.out.empty()) << "a key that holds data was shown as a lock: " << s.out;
    }
  }
  EXPECT_EQ(c.command({"GET", text}).str, "data");
  EXPECT_EQ(c.command({"HGET", record, "name"}).str, "alice");
  EXPECT_EQ(c.command({"HGET", record, "age"}).str, "30");
  EXPECT_EQ(c.command({"HGET", counters, "views"}).str, "12");
  for (const std::string& key : near_counts)
    EXPECT_EQ(c.command({"EXISTS", key}).integer, 1) << key;
}

// Holders' values and fields come from Redis, where anyone may write: the text output shows
// control bytes as \xNN instead of sending escape sequences to the reader's terminal.
TEST(CliStatus, ControlBytesInHoldersAreShownEscaped) {
  redis_server server;
  client c{server.url()};
  const std::string hostile = "evil\x1b]0;pwned\x07\x1b[2J\nfake line";
  const std::string plain = unique_key("plain"), hash = unique_key("hash");
  c.command({"SET", plain, hostile, "PX", "60000"});
  c.command({"HSET", hash, "ow\x1b[31mner\n:1", "1"});
  c.command({"PEXPIRE", hash, "60000"});
  for (const std::string& key : {plain, hash}) {
    const tools::command_result r = run_cli(server.url(), {"status", key});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find('\x07'), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\\x1b"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("\nfake line"), std::string::npos) << r.out;
  }
}

// --- the plain lock (--plain)
// ---------------------------------------------------------------------

TEST(CliPlain, ExecPlainHoldsTheSetNxKeyExcludesOthersAndStatusSaysWhatItIs) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("plain");
  cli_process holder({"--redis", server.url(), "exec", "--plain", name, "--", "sh", "-c",
                      R"(echo "$DLOCK_TOKEN $DLOCK_OWNER"; read line; exit 0)"});
  const auto line = holder.read_line();
  ASSERT_TRUE(line) << holder.err();
  const std::uint64_t token = std::stoull(line->substr(0, line->find(' ')));
  const std::string owner = line->substr(line->find(' ') + 1);
  const std::string value = owner + ":" + std::to_string(token);
  EXPECT_EQ(c.command({"TYPE", name}).str, "string");
  EXPECT_EQ(c.command({"GET", name}).str, value);
  EXPECT_FALSE(c.get_plain_lock(name).try_lock());
  // Another exec of the plain lock is excluded; the reentrant lock of the name meets a string and
  // refuses it as data (64).
  EXPECT_EQ(run_cli(server.url(), {"exec", "--plain", "-n", name, "--", "true"}).exit_code, 75);
  EXPECT_EQ(run_cli(server.url(), {"exec", "-n", name, "--", "true"}).exit_code, 64);

  const json held = status_json(server.url(), name);
  EXPECT_TRUE(held["locked"].boolean);
  EXPECT_EQ(held["kind"].text, "plain");
  ASSERT_EQ(held["holders"].items.size(), 1u);
  EXPECT_EQ(held["holders"].items[0]["owner"].text, value);
  EXPECT_EQ(held["last_fencing_token"].integer(), static_cast<std::int64_t>(token));
  EXPECT_GT(held["remaining_ttl_ms"].integer(), 0);
  const tools::command_result text = run_cli(server.url(), {"status", name});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("plain lock"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(value), std::string::npos) << text.out;

  holder.close_stdin();
  EXPECT_EQ(holder.wait(), 0) << holder.err();
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0) << "the plain lock was not released";
  EXPECT_EQ(status_json(server.url(), name)["kind"].text, "reentrant");  // free: the default
}

TEST(CliPlain, UnlockForceDeletesAForeignPlainLockAndWakesAPlainExec) {
  redis_server server;
  client c{server.url()};
  temp_dir dir;
  const std::string name = unique_key("plain"), marker = dir / "ran";
  // redis-py's layout: a uuid's hex digits, set with SET NX PX.
  ASSERT_EQ(c.command({"SET", name, "6f1c2a9e8b7d4c3fa1e2d3c4b5a69788", "NX", "PX", "30000"}).str,
            "OK");
  const json foreign = status_json(server.url(), name);
  EXPECT_EQ(foreign["kind"].text, "plain");
  EXPECT_EQ(foreign["holders"].items.at(0)["owner"].text, "6f1c2a9e8b7d4c3fa1e2d3c4b5a69788");
  cli_process waiter(
      {"--redis", server.url(), "exec", "--plain", name, "--", "sh", "-c", "echo ran"});
  EXPECT_FALSE(waiter.read_line(500ms)) << "ran while a foreign client held the plain lock";
  const tools::command_result r = run_cli(server.url(), {"unlock", "--force", name});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("released"), std::string::npos) << r.out;
  const auto ran = waiter.read_line(5s);
  ASSERT_TRUE(ran) << waiter.err();
  EXPECT_EQ(*ran, "ran");
  EXPECT_EQ(waiter.wait(), 0) << waiter.err();
}

// --- the demos -----------------------------------------------------------------------------------

TEST(CliDemo, FlashSaleWithoutRedisSellsExactlyTheStockWithALock) {
  const tools::command_result r =
      tools::run_command({cli, "demo", "flash-sale", "--buyers", "12", "--stock", "4"}, 60s);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("private redis-server"), std::string::npos) << r.out;
  auto result = result_line(r.out);
  EXPECT_EQ(result["locked_orders"], "4") << r.out;
  EXPECT_EQ(result["locked_stock_left"], "0") << r.out;
  EXPECT_EQ(result["fenced_orders"], "4") << r.out;
  EXPECT_EQ(result["fenced_stock_left"], "0") << r.out;
  EXPECT_EQ(result["stale_writes_refused"], "1") << r.out;
  EXPECT_EQ(result["verdict"], "pass") << r.out;
}

TEST(CliDemo, RewardIsPaidOnceWithALock) {
  const tools::command_result r =
      tools::run_command({cli, "demo", "reward", "--members", "8"}, 60s);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  auto result = result_line(r.out);
  EXPECT_EQ(result["locked_payouts"], "1") << r.out;
  EXPECT_EQ(result["verdict"], "pass") << r.out;
}

// A private Sentinel group (1 master, 1 replica, 3 sentinels) and three failovers of about 3 s
// each: about 15 s in all.
TEST(CliDemo, FailoverGrantsTwiceWithoutMinReplicasNotWithItAndFencingRefusesTheStaleWrite) {
  const tools::command_result r = tools::run_command({cli, "demo", "failover"}, 180s);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("private Sentinel group"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stale holder told"), std::string::npos) << r.out;
  auto result = result_line(r.out);
  EXPECT_EQ(result["granted_twice_without_min_replicas"], "yes") << r.out;
  EXPECT_EQ(result["granted_twice_with_min_replicas"], "no") << r.out;
  EXPECT_EQ(result["stale_write_refused"], "yes") << r.out;
  EXPECT_EQ(result["verdict"], "pass") << r.out;
  EXPECT_EQ(r.out.find("[FAIL]"), std::string::npos) << r.out;
}

TEST(CliDemo, FailoverRefusesAServerItDidNotStart) {
  const tools::command_result r =
      tools::run_command({cli, "--redis", "redis://127.0.0.1:1", "demo", "failover"}, step_limit);
  EXPECT_EQ(r.exit_code, 64) << r.out << r.err;
  EXPECT_NE(r.err.find("kills masters"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace dlock

// --- the read-write lock (-s, -x)
// -----------------------------------------------------------------

namespace dlock {
namespace {

TEST(CliReadWrite, SharedExecsRunTogetherAndAnExclusiveOneWaitsForThem) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("rw");
  const std::string show = R"(echo "$DLOCK_TOKEN $DLOCK_OWNER"; read line; exit 0)";
  cli_process first({"--redis", server.url(), "exec", "-s", name, "--", "sh", "-c", show});
  cli_process second({"--redis", server.url(), "exec", "--shared", name, "--", "sh", "-c", show});
  // Both commands run at once: readers share.
  const auto first_line = first.read_line(), second_line = second.read_line();
  ASSERT_TRUE(first_line) << first.err();
  ASSERT_TRUE(second_line) << second.err();
  EXPECT_EQ(first_line->substr(0, 2), "0 ") << "a read hold has no fencing token";
  EXPECT_EQ(c.command({"HGET", name, "mode"}).str, "read");

  EXPECT_EQ(run_cli(server.url(), {"exec", "-x", "-n", name, "--", "true"}).exit_code, 75);
  // A reentrant lock on the name meets a read-write lock: refused as another kind (64).
  EXPECT_EQ(run_cli(server.url(), {"exec", "-n", name, "--", "true"}).exit_code, 64);

  const json held = status_json(server.url(), name);
  EXPECT_TRUE(held["locked"].boolean);
  EXPECT_EQ(held["kind"].text, "read_write");
  EXPECT_EQ(held["mode"].text, "read");
  EXPECT_EQ(held["holders"].items.size(), 2u);
  const tools::command_result text = run_cli(server.url(), {"status", name});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("read-write lock"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("mode                read"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("reader              " + first_line->substr(2)), std::string::npos)
      << text.out;

  // A waiting writer runs once both readers have left.
  cli_process writer({"--redis", server.url(), "exec", "-x", name, "--", "sh", "-c", show});
  EXPECT_FALSE(writer.read_line(500ms)) << "the writer ran beside readers";
  first.close_stdin();
  EXPECT_EQ(first.wait(), 0) << first.err();
  EXPECT_FALSE(writer.read_line(300ms)) << "the writer ran beside a reader";
  second.close_stdin();
  EXPECT_EQ(second.wait(), 0) << second.err();
  const auto writer_line = writer.read_line();
  ASSERT_TRUE(writer_line) << writer.err();
  EXPECT_GT(std::stoull(writer_line->substr(0, writer_line->find(' '))), 0u);
  const json writing = status_json(server.url(), name);
  EXPECT_EQ(writing["mode"].text, "write");
  ASSERT_EQ(writing["holders"].items.size(), 1u);
  EXPECT_EQ(writing["holders"].items[0]["owner"].text,
            writer_line->substr(writer_line->find(' ') + 1) + ":write");
  EXPECT_EQ(run_cli(server.url(), {"exec", "-s", "-n", name, "--", "true"}).exit_code, 75);
  writer.close_stdin();
  EXPECT_EQ(writer.wait(), 0) << writer.err();
  EXPECT_EQ(c.command({"EXISTS", name}).integer, 0) << "the write lock was not released";
}

TEST(CliReadWrite, BadCombinationsAreUsageErrors) {
  redis_server server;
  const std::string name = unique_key("rw");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"exec", "-s", "-x", name, "--", "true"},
        std::vector<std::string>{"exec", "-s", "--plain", name, "--", "true"},
        std::vector<std::string>{"exec", "-x", "--plain", name, "--", "true"},
        std::vector<std::string>{"--redis", server.url(), "exec", "-x", name, "--", "true"}}) {
    const tools::command_result r = run_cli(server.url(), args);
    EXPECT_EQ(r.exit_code, 64) << args[1] << " " << args[2] << ": " << r.err;
  }
}

TEST(CliReadWrite, UnlockForceFreesAReadWriteLockAndWakesAWaitingWriter) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("rw");
  shared_mutex rw = c.get_read_write_lock(name);
  rw.lock_shared();
  cli_process writer({"--redis", server.url(), "exec", "-x", name, "--", "sh", "-c", "echo ran"});
  EXPECT_FALSE(writer.read_line(500ms)) << "ran beside a reader";
  const tools::command_result r = run_cli(server.url(), {"unlock", "--force", name});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("released"), std::string::npos) << r.out;
  EXPECT_EQ(writer.read_line(5s), "ran") << writer.err();
  EXPECT_EQ(writer.wait(), 0) << writer.err();
  rw.unlock_shared();  // its hold was deleted: the watchdog reports it lost, unlock changes nothing
}

}  // namespace
}  // namespace dlock

// --- kinds that meet on one name
// -----------------------------------------------------------------

namespace dlock {
namespace {

// A read-write exec on a name a plain exec holds, and the reverse: a message naming both kinds,
// and 64 (README's "usage error", as every errc::wrong_type), never a wait or Redis's WRONGTYPE.
// A hash whose field is not a lock holder's is data, to exec as to status and unlock: refused
// with 64 and left alone, instead of waited for until someone deletes it.
TEST(CliKinds, ExecOnAHashThatHoldsDataIsAUsageErrorAndLeavesItAlone) {
  redis_server server;
  client c{server.url()};
  const std::string name = unique_key("record");
  c.command({"HSET", name, "name", "bob"});
  const tools::command_result r = run_cli(server.url(), {"exec", "-w", "5", name, "--", "true"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("a hash that is not a lock"), std::string::npos) << r.err;
  EXPECT_EQ(c.command({"HGET", name, "name"}).str, "bob");
}

TEST(CliKinds, ExecOfAnotherKindOnAHeldNameNamesBothKindsAndExits64) {
  redis_server server;
  const std::string name = unique_key("kinds");
  const std::string ready = R"(echo ready; read line; exit 0)";
  cli_process plain({"--redis", server.url(), "exec", "--plain", name, "--", "sh", "-c", ready});
  ASSERT_EQ(plain.read_line(), "ready") << plain.err();
  for (const char* side : {"-s", "-x"}) {
    const tools::command_result r = run_cli(server.url(), {"exec", side, name, "--", "true"});
    EXPECT_EQ(r.exit_code, 64) << side << ": " << r.err;
    EXPECT_NE(r.err.find("plain lock"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("not a read-write lock"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("WRONGTYPE"), std::string::npos) << r.err;
  }
  const tools::command_result reentrant = run_cli(server.url(), {"exec", name, "--", "true"});
  EXPECT_EQ(reentrant.exit_code, 64) << reentrant.err;
  EXPECT_NE(reentrant.err.find("a plain lock"), std::string::npos) << reentrant.err;
  EXPECT_NE(reentrant.err.find("not a reentrant lock"), std::string::npos) << reentrant.err;
  plain.close_stdin();
  EXPECT_EQ(plain.wait(), 0) << plain.err();

  cli_process reader({"--redis", server.url(), "exec", "-s", name, "--", "sh", "-c", ready});
  ASSERT_EQ(reader.read_line(), "ready") << reader.err();
  const tools::command_result r = run_cli(server.url(), {"exec", "--plain", name, "--", "true"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("read-write lock"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not a plain lock"), std::string::npos) << r.err;
  reader.close_stdin();
  EXPECT_EQ(reader.wait(), 0) << reader.err();
}

}  // namespace
}  // namespace dlock
