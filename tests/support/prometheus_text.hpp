// tests/support/prometheus_text.hpp
//
// For tests of operating dlock: a strict parser of the Prometheus text exposition format
// (version 0.0.4) that fails the running test on every violation, checks of histogram series,
// and a recorder of log records a test can wait on. Used by the client's and Redlock's tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dlock/log.hpp"

namespace dlock::test {

struct sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct family {
  std::string type;  // counter, gauge, histogram
  std::string help;
  std::vector<sample> samples;
};

using exposition = std::map<std::string, family>;

inline std::map<std::string, std::string> parse_labels(const std::string& text, int line) {
  std::map<std::string, std::string> labels;
  std::size_t i = 0;
  static const std::regex name_re("[a-zA-Z_][a-zA-Z0-9_]*");
  while (i < text.size()) {
    const std::size_t eq = text.find('=', i);
    if (eq == std::string::npos) {
      ADD_FAILURE() << "line " << line << ": label without '=' in {" << text << "}";
      return labels;
    }
    const std::string name = text.substr(i, eq - i);
    EXPECT_TRUE(std::regex_match(name, name_re)) << "line " << line << ": label name " << name;
    if (eq + 1 >= text.size() || text[eq + 1] != '"') {
      ADD_FAILURE() << "line " << line << ": unquoted label value in {" << text << "}";
      return labels;
    }
    std::string value;
    std::size_t j = eq + 2;
    for (; j < text.size() && text[j] != '"'; ++j) {
      if (text[j] == '\\' && j + 1 < text.size()) {
        const char c = text[++j];
        value += c == 'n' ? '\n' : c;
      } else {
        value += text[j];
      }
    }
    if (j >= text.size()) {
      ADD_FAILURE() << "line " << line << ": unterminated label value in {" << text << "}";
      return labels;
    }
    EXPECT_TRUE(labels.emplace(name, value).second)
        << "line " << line << ": label " << name << " twice";
    i = j + 1;
    if (i < text.size()) {
      EXPECT_EQ(text[i], ',') << "line " << line << ": labels not separated by ','";
      ++i;
    }
  }
  return labels;
}

// The family a sample line belongs to: its own name, or a histogram's name for the _bucket,
// _sum and _count series.
inline std::string family_of(const std::string& name, const exposition& families) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s(suffix);
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      const std::string base = name.substr(0, name.size() - s.size());
      const auto it = families.find(base);
      if (it != families.end() && it->second.type == "histogram") return base;
    }
  }
  return name;
}

// Parses `text`, failing the test on every violation: a line that is neither a HELP, a TYPE nor
// `name{labels} value`; a sample before its family's TYPE or away from its family's other samples;
// a family declared twice; a name not starting with dlock_; a counter not ending in _total.
inline exposition parse_exposition(const std::string& text) {
  exposition families;
  static const std::regex help_re(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) (.+))");
  static const std::regex type_re(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram))");
  static const std::regex sample_re(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? ([-+]?(?:[0-9]+(?:\.[0-9]*)?(?:e[-+]?[0-9]+)?|\+Inf|NaN)))");
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n') << "the exposition must end with a line feed";
  std::istringstream in(text);
  std::string line;
  std::string current;  // the family whose samples are being read
  std::set<std::string> finished;
  int number = 0;
  std::smatch m;
  while (std::getline(in, line)) {
    ++number;
    if (std::regex_match(line, m, help_re)) {
      const std::string name = m[1];
      EXPECT_EQ(families.count(name), 0u) << "line " << number << ": HELP after TYPE or twice";
      if (!current.empty()) finished.insert(current);
      current.clear();
      families[name].help = m[2];
      families[name].type = "";  // TYPE must follow
      continue;
    }
    if (std::regex_match(line, m, type_re)) {
      const std::string name = m[1];
      family& f = families[name];
      EXPECT_TRUE(f.type.empty()) << "line " << number << ": TYPE twice for " << name;
      EXPECT_TRUE(f.samples.empty()) << "line " << number << ": TYPE after samples of " << name;
      f.type = m[2];
      EXPECT_EQ(name.rfind("dlock_", 0), 0u) << name << " is not prefixed dlock_";
      if (f.type == "counter") {
        EXPECT_TRUE(name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0)
            << "counter " << name << " does not end in _total";
      }
      if (!current.empty()) finished.insert(current);
      current = name;
      continue;
    }
    if (!std::regex_match(line, m, sample_re)) {
      ADD_FAILURE() << "line " << number << " is not HELP, TYPE or a sample: '" << line << "'";
      continue;
    }
    sample s;
    s.name = m[1];
    s.labels = parse_labels(m[2], number);
    const std::string value = m[3];
    s.value = value == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(value);
    const std::string owner = family_of(s.name, families);
    const auto it = families.find(owner);
    if (it == families.end() || it->second.type.empty()) {
      ADD_FAILURE() << "line " << number << ": sample of " << owner << " before its TYPE";
      continue;
    }
    EXPECT_EQ(owner, current) << "line " << number << ": samples of " << owner
                              << " not kept together";
    EXPECT_EQ(finished.count(owner), 0u);
    it->second.samples.push_back(std::move(s));
  }
  for (const auto& [name, f] : families) {
    EXPECT_FALSE(f.help.empty()) << name << " has no HELP";
    EXPECT_FALSE(f.type.empty()) << name << " has no TYPE";
  }
  return families;
}

// Checks every histogram: per series (its labels but le), buckets in increasing le, cumulative
// counts that never decrease, a last bucket le="+Inf" equal to _count, and a _sum.
inline void check_histograms(const exposition& families) {
  for (const auto& [name, f] : families) {
    if (f.type != "histogram") continue;
    std::map<std::map<std::string, std::string>, std::vector<const sample*>> buckets;
    std::map<std::map<std::string, std::string>, double> counts, sums;
    for (const sample& s : f.samples) {
      if (s.name == name + "_bucket") {
        auto labels = s.labels;
        EXPECT_EQ(labels.count("le"), 1u) << name << " bucket without le";
        labels.erase("le");
        buckets[labels].push_back(&s);
      } else if (s.name == name + "_count") {
        counts[s.labels] = s.value;
      } else if (s.name == name + "_sum") {
        sums[s.labels] = s.value;
      } else {
        ADD_FAILURE() << "histogram " << name << " has a sample " << s.name;
      }
    }
    EXPECT_FALSE(buckets.empty()) << name << " has no series";
    for (const auto& [labels, series] : buckets) {
      double previous_le = -1;
      double previous_count = 0;
      for (const sample* b : series) {
        const std::string le_text = b->labels.at("le");
        const double le =
            le_text == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(le_text);
        EXPECT_GT(le, previous_le) << name << " buckets out of order";
        EXPECT_GE(b->value, previous_count) << name << " buckets not cumulative";
        previous_le = le;
        previous_count = b->value;
      }
      EXPECT_EQ(series.back()->labels.at("le"), "+Inf") << name << " does not end in +Inf";
      ASSERT_EQ(counts.count(labels), 1u) << name << " series without _count";
      EXPECT_EQ(series.back()->value, counts.at(labels)) << name << ": +Inf bucket != _count";
      EXPECT_EQ(sums.count(labels), 1u) << name << " series without _sum";
    }
  }
}

// The value of the sample `name` with exactly `labels`; nullopt when there is none.
inline std::optional<double> value_of(const exposition& families, const std::string& name,
                                      const std::map<std::string, std::string>& labels = {}) {
  for (const auto& [unused, f] : families)
    for (const sample& s : f.samples)
      if (s.name == name && s.labels == labels) return s.value;
  return std::nullopt;
}

// --- the log hook -------------------------------------------------------------------------------

struct logged {
  log_level level;
  std::string message;
  std::map<std::string, std::string> fields;
};

// Keeps every record the hook hears; a test waits for one as an event.
class log_recorder {
 public:
  log_handler handler() {
    return [this](const log_record& r) {
      logged entry{r.level, std::string(r.message), {}};
      for (const log_field& f : r.fields)
        entry.fields.emplace(std::string(f.key), f.value);
      {
        std::lock_guard lock(mutex_);
        records_.push_back(std::move(entry));
      }
      changed_.notify_all();
    };
  }

  // Every record with `message` so far, oldest first.
  std::vector<logged> all(const std::string& message) {
    std::lock_guard lock(mutex_);
    std::vector<logged> out;
    std::copy_if(records_.begin(), records_.end(), std::back_inserter(out),
                 [&](const logged& r) { return r.message == message; });
    return out;
  }

  // The first record with `message`, waiting up to `limit` for it.
  std::optional<logged> wait_for(const std::string& message, std::chrono::milliseconds limit) {
    return wait_for(message, limit, [](const logged&) { return true; });
  }

  // The first record with `message` for which `match(record)` holds, waiting up to `limit`.
  template <typename Match>
  std::optional<logged> wait_for(const std::string& message, std::chrono::milliseconds limit,
                                 Match match) {
    std::unique_lock lock(mutex_);
    std::optional<logged> found;
    changed_.wait_for(lock, limit, [&] {
      const auto it = std::find_if(records_.begin(), records_.end(), [&](const logged& r) {
        return r.message == message && match(r);
      });
      if (it != records_.end()) found = *it;
      return found.has_value();
    });
    return found;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<logged> records_;
};

}  // namespace dlock::test
