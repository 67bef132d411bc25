// Minimal leveled logging to stderr. The level is part of a Logger passed by the app;
// libraries that need to log take a `const Logger&`.
#pragma once

#include <fmt/format.h>

#include <cstdio>

namespace ds {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3, off = 4 };

class Logger {
 public:
  explicit Logger(LogLevel level = LogLevel::info) : level_(level) {}
  LogLevel level() const { return level_; }

  template <class... Args>
  void log(LogLevel level, fmt::format_string<Args...> f, Args&&... args) const {
    if (level < level_) return;
    std::string line = fmt::format(f, std::forward<Args>(args)...);
    std::fprintf(stderr, "[%s] %s\n", tag(level), line.c_str());
  }

 private:
  static const char* tag(LogLevel l) {
    switch (l) {
      case LogLevel::debug:
        return "debug";
      case LogLevel::info:
        return "info";
      case LogLevel::warn:
        return "warn";
      case LogLevel::error:
        return "error";
      default:
        return "?";
    }
  }
  LogLevel level_;
};

}  // namespace ds
