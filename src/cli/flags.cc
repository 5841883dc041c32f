// gangkeeper CLI: flag parsing on CLI11 (see flags.h). CLI11 replaces the
// home-made parser, which had no short flags (-n, -A), no repeated flags
// and printed short flags as --o.
#include "src/cli/flags.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace gangkeeper::cli {
namespace {

std::vector<std::string>* completion_sink = nullptr;

// "n,namespace" -> {"-n", "--namespace"}: one letter is a short flag.
std::vector<std::string> FlagSpellings(const std::string& name) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(name, ',')) {
    out.push_back(absl::StrCat(part.size() == 1 ? "-" : "--", part));
  }
  return out;
}

// The flag's longest spelling, for messages: --namespace.
std::string FlagMainSpelling(const std::string& name) {
  std::vector<std::string> s = FlagSpellings(name);
  return *std::max_element(s.begin(), s.end(), [](const auto& a, const auto& b) { return a.size() < b.size(); });
}

// `text` wrapped at `width` columns, continuation lines indented by
// `indent` spaces (the first line is not).
std::string FlagWrap(const std::string& text, size_t indent, size_t width) {
  std::string out;
  size_t column = indent;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (column > indent && column + 1 + word.size() > width) {
      absl::StrAppend(&out, "\n", std::string(indent, ' '));
      column = indent;
    } else if (column > indent) {
      out += ' ';
      ++column;
    }
    absl::StrAppend(&out, word);
    column += word.size();
  }
  return out;
}

}  // namespace

void SetCompletionSinkForFlags(std::vector<std::string>* sink) { completion_sink = sink; }

void FlagSet::String(std::string name, std::string* target, std::string help) {
  flags_.push_back({std::move(name), Type::kString, target, std::move(help), *target});
}

void FlagSet::Strings(std::string name, std::vector<std::string>* target, std::string help) {
  flags_.push_back({std::move(name), Type::kStrings, target, std::move(help), absl::StrJoin(*target, ",")});
}

void FlagSet::Int(std::string name, int* target, std::string help) {
  flags_.push_back({std::move(name), Type::kInt, target, std::move(help), absl::StrCat(*target)});
}

void FlagSet::Size(std::string name, size_t* target, std::string help) {
  flags_.push_back({std::move(name), Type::kSize, target, std::move(help), absl::StrCat(*target)});
}

void FlagSet::Bool(std::string name, bool* target, std::string help) {
  flags_.push_back({std::move(name), Type::kBool, target, std::move(help), *target ? "true" : "false"});
}

void FlagSet::Duration(std::string name, absl::Duration* target, std::string help) {
  flags_.push_back({std::move(name), Type::kDuration, target, std::move(help), absl::FormatDuration(*target)});
}

// Declares every flag to CLI11; a value's problem goes to *problem (a
// callback must not throw: errors are values).
void FlagSet::AddToApp(CLI::App* app, absl::Status* problem) const {
  for (const Flag& f : flags_) {
    const std::string spelled = absl::StrJoin(FlagSpellings(f.name), ",");
    const std::string main = FlagMainSpelling(f.name);
    auto keep = [problem](absl::Status s) {
      if (problem->ok()) *problem = std::move(s);
    };
    auto set = [&f, main, keep](const std::string& v) {
      switch (f.type) {
        case Type::kString:
          *static_cast<std::string*>(f.target) = v;
          return;
        case Type::kStrings:
          for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipEmpty())) {
            static_cast<std::vector<std::string>*>(f.target)->push_back(std::string(part));
          }
          return;
        case Type::kInt:
          if (!absl::SimpleAtoi(v, static_cast<int*>(f.target))) {
            keep(absl::InvalidArgumentError(absl::StrCat(main, "=", v, ": expected an integer")));
          }
          return;
        case Type::kSize: {
          uint64_t value = 0;
          if (!absl::SimpleAtoi(v, &value)) {
            keep(absl::InvalidArgumentError(absl::StrCat(main, "=", v, ": expected a non-negative integer")));
            return;
          }
          *static_cast<size_t*>(f.target) = static_cast<size_t>(value);
          return;
        }
        case Type::kDuration: {
          auto* d = static_cast<absl::Duration*>(f.target);
          if (!absl::ParseDuration(v, d) || *d < absl::ZeroDuration()) {
            keep(absl::InvalidArgumentError(
                absl::StrCat(main, "=", v, ": expected a duration such as 500ms, 25s or 2m")));
          }
          return;
        }
        case Type::kBool:
          return;
      }
    };
    if (f.type == Type::kBool) {
      auto* b = static_cast<bool*>(f.target);
      std::string names = spelled;
      for (const std::string& s : FlagSpellings(f.name)) {
        if (absl::StartsWith(s, "--")) absl::StrAppend(&names, ",!--no-", s.substr(2));
      }
      app->add_flag_function(
          names,
          [b](int64_t count) { *b = count > 0; },
          f.help);
    } else if (f.type == Type::kStrings) {
      app->add_option_function<std::vector<std::string>>(
             spelled, [set](const std::vector<std::string>& vs) { for (const auto& v : vs) set(v); }, f.help)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
          ->allow_extra_args(false);  // -f a x: x is positional, as in kubectl
    } else {
      app->add_option_function<std::string>(spelled, set, f.help);
    }
  }
}

absl::Status FlagSet::Parse(const std::vector<std::string>& args, std::vector<std::string>* positional, bool* help) {
  *help = false;
  CLI::App app(summary_, absl::StrCat("gangkeeper ", command_));
  app.set_help_flag();  // our own -h/--help and Usage()
  app.allow_extras(true);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_flag("-h,--help", *help);
  // Values are checked by our callbacks; the first problem is kept here.
  absl::Status problem;
  std::vector<std::string> words;
  AddToApp(&app, &problem);
  app.add_option("ARGS", words)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  // What follows "--" is positional; --bool=VALUE is checked here (CLI11
  // would hand "maybe" to std::stoll).
  std::vector<std::string> after_dashes;
  std::vector<std::string> reversed;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      after_dashes.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    std::string arg = args[i];
    const size_t eq = arg.find('=');
    if (absl::StartsWith(arg, "--") && eq != std::string::npos) {
      const std::string name = arg.substr(2, eq - 2);
      const std::string value = arg.substr(eq + 1);
      for (const Flag& f : flags_) {
        if (f.type != Type::kBool) continue;
        for (const std::string& spelled : FlagSpellings(f.name)) {
          if (spelled != "--" + name) continue;
          if (value == "true" || value == "1" || value == "yes") {
            arg = spelled;
          } else if (value == "false" || value == "0" || value == "no") {
            arg = "--no-" + name;
          } else {
            return absl::InvalidArgumentError(absl::StrCat("--", name, "=", value, ": expected true or false"));
          }
        }
      }
    }
    reversed.insert(reversed.begin(), arg);
  }
  try {
    app.parse(reversed);
  } catch (const CLI::ArgumentMismatch& e) {
    std::string which = e.what();
    for (const Flag& f : flags_) {
      for (const std::string& s : FlagSpellings(f.name)) {
        if (absl::StrContains(which, s)) {
          return absl::InvalidArgumentError(absl::StrCat(command_, ": flag ", s, " needs a value"));
        }
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(command_, ": ", which));
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(absl::StrCat(command_, ": ", e.what()));
  } catch (const std::exception& e) {  // a conversion inside CLI11
    return absl::InvalidArgumentError(absl::StrCat(command_, ": ", e.what(), "; see gangkeeper ", command_, " --help"));
  }
  if (!problem.ok()) return problem;
  for (const std::string& extra : app.remaining()) {
    if (absl::StartsWith(extra, "-") && extra != "-") {
      std::string name = extra.substr(0, extra.find('='));
      return absl::InvalidArgumentError(
          absl::StrCat(command_, ": unknown flag ", name, "; see gangkeeper ", command_, " --help"));
    }
    words.push_back(extra);
  }
  words.insert(words.end(), after_dashes.begin(), after_dashes.end());
  if (!words.empty() && positional == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(command_, ": unexpected argument \"", words[0], "\""));
  }
  if (positional != nullptr) positional->insert(positional->end(), words.begin(), words.end());
  return absl::OkStatus();
}

std::string FlagSet::Usage() const {
  std::string out = absl::StrCat(
      "usage: ", synopsis_.empty() ? absl::StrCat("gangkeeper ", command_, " [flags]") : synopsis_, "\n\n");
  for (absl::string_view line : absl::StrSplit(summary_, '\n')) absl::StrAppend(&out, FlagWrap(std::string(line), 0, 118), "\n");
  absl::StrAppend(&out, "\nflags:\n");
  for (const Flag& f : flags_) {
    std::vector<std::string> spelled = FlagSpellings(f.name);
    std::string names = absl::StrJoin(spelled, ", ");
    if (spelled.size() == 1 && spelled[0].size() > 2) names = "    " + names;  // long flags line up
    switch (f.type) {
      case Type::kBool:
        break;
      case Type::kInt:
      case Type::kSize:
        absl::StrAppend(&names, " N");
        break;
      case Type::kDuration:
        absl::StrAppend(&names, " DURATION");
        break;
      default:
        absl::StrAppend(&names, " VALUE");
    }
    std::string help = f.help;
    if (!f.default_text.empty() && f.default_text != "false" && f.default_text != "0") {
      absl::StrAppend(&help, " (default ", f.default_text, ")");
    }
    if (names.size() > 30) absl::StrAppend(&names, "\n", std::string(32, ' '));
    absl::StrAppendFormat(&out, "  %-30s %s\n", names, FlagWrap(help, 33, 118));
  }
  absl::StrAppend(&out, "  -h, --help                     this text\n");
  if (!examples_.empty()) absl::StrAppend(&out, "\nexamples:\n", examples_, absl::EndsWith(examples_, "\n") ? "" : "\n");
  absl::StrAppend(&out, "\nexit codes: ",
                  exit_codes_.empty() ? "0 done; 1 an error (the server refused, or the work failed); 2 a usage error"
                                      : exit_codes_,
                  "\n");
  return out;
}

std::vector<std::string> FlagSet::Spellings() const {
  std::vector<std::string> out;
  for (const Flag& f : flags_) {
    for (const std::string& s : FlagSpellings(f.name)) {
      out.push_back(s);
      if (f.type == Type::kBool && absl::StartsWith(s, "--")) out.push_back("--no-" + s.substr(2));
    }
  }
  out.push_back("--help");
  return out;
}

std::optional<int> FlagSet::ParseOrExit(const std::vector<std::string>& args, std::vector<std::string>* positional) {
  if (completion_sink != nullptr) {
    *completion_sink = Spellings();
    return 0;
  }
  bool help = false;
  if (absl::Status s = Parse(args, positional, &help); !s.ok()) {
    if (help) {
      std::fputs(Usage().c_str(), stdout);
      return 0;
    }
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
