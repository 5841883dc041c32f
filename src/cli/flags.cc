// gangkeeper CLI: flag parsing (see flags.h).
#include "src/cli/flags.h"

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gangkeeper::cli {

void FlagSet::String(std::string name, std::string* target, std::string help) {
  flags_.push_back({std::move(name), std::move(help), *target, false, [target](absl::string_view v) {
                      *target = std::string(v);
                      return absl::OkStatus();
                    }});
}

void FlagSet::Int(std::string name, int* target, std::string help) {
  std::string n = name;
  flags_.push_back({std::move(name), std::move(help), absl::StrCat(*target), false, [target, n](absl::string_view v) {
                      if (!absl::SimpleAtoi(v, target)) {
                        return absl::InvalidArgumentError(absl::StrCat("--", n, "=", v, ": expected an integer"));
                      }
                      return absl::OkStatus();
                    }});
}

void FlagSet::Size(std::string name, size_t* target, std::string help) {
  std::string n = name;
  flags_.push_back({std::move(name), std::move(help), absl::StrCat(*target), false, [target, n](absl::string_view v) {
                      uint64_t value = 0;
                      if (!absl::SimpleAtoi(v, &value)) {
                        return absl::InvalidArgumentError(
                            absl::StrCat("--", n, "=", v, ": expected a non-negative integer"));
                      }
                      *target = static_cast<size_t>(value);
                      return absl::OkStatus();
                    }});
}

void FlagSet::Bool(std::string name, bool* target, std::string help) {
  std::string n = name;
  flags_.push_back({std::move(name), std::move(help), *target ? "true" : "false", true,
                    [target, n](absl::string_view v) {
                      if (v == "true" || v == "1" || v == "yes") {
                        *target = true;
                      } else if (v == "false" || v == "0" || v == "no") {
                        *target = false;
                      } else {
                        return absl::InvalidArgumentError(absl::StrCat("--", n, "=", v, ": expected true or false"));
                      }
                      return absl::OkStatus();
                    }});
}

void FlagSet::Duration(std::string name, absl::Duration* target, std::string help) {
  std::string n = name;
  flags_.push_back({std::move(name), std::move(help), absl::FormatDuration(*target), false,
                    [target, n](absl::string_view v) {
                      if (!absl::ParseDuration(v, target) || *target < absl::ZeroDuration()) {
                        return absl::InvalidArgumentError(
                            absl::StrCat("--", n, "=", v, ": expected a duration such as 500ms, 25s or 2m"));
                      }
                      return absl::OkStatus();
                    }});
}

const FlagSet::Flag* FlagSet::Find(absl::string_view name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::Status FlagSet::Parse(const std::vector<std::string>& args, std::vector<std::string>* positional, bool* help) {
  *help = false;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      *help = true;
      continue;
    }
    if (arg == "--") {
      for (size_t j = i + 1; j < args.size(); ++j) {
        if (positional == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat(command_, ": unexpected argument \"", args[j], "\""));
        }
        positional->push_back(args[j]);
      }
      break;
    }
    if (!absl::StartsWith(arg, "-") || arg == "-") {
      if (positional == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(command_, ": unexpected argument \"", arg, "\""));
      }
      positional->push_back(std::string(arg));
      continue;
    }
    absl::string_view body = arg.substr(absl::StartsWith(arg, "--") ? 2 : 1);
    absl::string_view name = body;
    std::string value;
    bool has_value = false;
    if (size_t eq = body.find('='); eq != absl::string_view::npos) {
      name = body.substr(0, eq);
      value = std::string(body.substr(eq + 1));
      has_value = true;
    }
    const Flag* flag = Find(name);
    if (flag == nullptr && !has_value && absl::StartsWith(name, "no-")) {
      const Flag* negated = Find(name.substr(3));
      if (negated != nullptr && negated->is_bool) {
        absl::Status s = negated->set("false");
        if (!s.ok()) return s;
        continue;
      }
    }
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(command_, ": unknown flag --", name, "; see gangkeeper ", command_, " --help"));
    }
    if (!has_value) {
      if (flag->is_bool) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat(command_, ": flag --", name, " needs a value"));
      }
    }
    absl::Status s = flag->set(value);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string FlagSet::Usage() const {
  std::string out = absl::StrCat("usage: gangkeeper ", command_, " [flags]\n\n", summary_, "\n\nflags:\n");
  for (const Flag& f : flags_) {
    absl::StrAppendFormat(&out, "  --%-26s %s", f.name, f.help);
    if (!f.default_text.empty()) absl::StrAppend(&out, " (default ", f.default_text, ")");
    out += "\n";
  }
  return out;
}

std::optional<int> FlagSet::ParseOrExit(const std::vector<std::string>& args, std::vector<std::string>* positional) {
  bool help = false;
  if (absl::Status s = Parse(args, positional, &help); !s.ok()) {
    std::fprintf(stderr, "gangkeeper: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (help) {
    std::fputs(Usage().c_str(), stdout);
    return 0;
  }
  return std::nullopt;
}

}  // namespace gangkeeper::cli
