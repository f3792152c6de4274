// The training flags as rows: every row's check refuses a value just outside its range (or a
// name not in its list) in the one shape, naming the flag; the defaults pass; and the flags
// several commands share have one declaration, the same in every command's --help.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <type_traits>
#include <variant>

#include "train/train_option_rows.h"
#include "trainer_test_util.h"

namespace gpulab::train {
namespace {

using testing::run_gpulab;

// A value just outside the row's range (below it, else above), or nothing when it is unbounded
// both ways.
template <typename T>
std::optional<T> just_outside(const FlagRange& r) {
  const double step = std::is_integral_v<T> ? 1.0 : 1e-9;
  if (std::isfinite(r.lo)) return static_cast<T>(r.lo_open ? r.lo : r.lo - step);
  if (std::isfinite(r.hi)) return static_cast<T>(r.hi_open ? r.hi : r.hi + step);
  return std::nullopt;
}

TEST(OptionRows, TheDefaultsPassEveryRowsCheck) {
  EXPECT_TRUE(check_option_rows(TrainOptions{}));
}

TEST(OptionRows, EachRowRefusesAValueOutsideItsCheckNamingTheFlagAndTheRange) {
  int checked = 0;
  for (const TrainOptionRow& row : train_option_rows()) {
    TrainOptions o;
    std::string want;
    std::visit(
        [&](auto field) {
          using T = std::decay_t<decltype(o.*field)>;
          if constexpr (std::is_same_v<T, std::string>) {
            if (!row.one_of) return;
            o.*field = "nosuch";
            want = "--" + std::string(row.name) + " 'nosuch' is not valid";
          } else if constexpr (!std::is_same_v<T, bool>) {
            if (!row.range) return;
            const auto bad = just_outside<T>(*row.range);
            if (!bad) return;
            o.*field = *bad;
            want = "--" + std::string(row.name) + " " + fmt::format("{}", *bad) + " is outside " +
                   row.range->text();
          }
        },
        row.field);
    if (want.empty()) continue;
    const Status st = check_option_rows(o);
    ASSERT_FALSE(st) << row.name;
    EXPECT_EQ(st.error().message, want);
    EXPECT_EQ(st.error().code, Code::kInvalidArgument);
    ++checked;
  }
  EXPECT_EQ(checked, 52);  // 15 name lists and 37 ranges: a row that lost its check fails here
}

// The help line of one flag in `gpulab <command> --help`: its spelling, type and text, without
// the default (a command's default may differ).
std::string help_line(const std::vector<std::string>& command, const std::string& flag) {
  std::vector<std::string> args = command;
  args.push_back("--help");
  const auto r = run_gpulab(args, 60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::regex line("\\n  (" + flag + "(?:,--[a-z-]+)? [A-Z]+)(?:=[^ ]*)?\\s+([^\\n]+)");
  std::smatch m;
  if (!std::regex_search(r.out, m, line)) return "(no " + flag + " in " + command[0] + ")";
  return m[1].str() + " " + m[2].str();
}

TEST(OptionRows, SharedFlagsAreDeclaredOnceAcrossCommands) {
  const std::vector<std::vector<std::string>> device_cmds = {
      {"train"},    {"bench", "train"}, {"bench", "parity"}, {"bench", "generate"},
      {"generate"}, {"infer"},          {"gpu-test"}};
  const std::string device = help_line({"train"}, "--device");
  EXPECT_EQ(device, "--device TEXT " + std::string(train_option_row("device").help));
  for (const auto& c : device_cmds) EXPECT_EQ(help_line(c, "--device"), device) << c[0];
  for (const auto& c : std::vector<std::vector<std::string>>{{"bench", "parity"}, {"generate"}})
    EXPECT_NE(help_line(c, "--seed").find(train_option_row("seed").help), std::string::npos);
  // One spelling policy: the kebab twin of --batch_size works wherever it does.
  for (const auto& c :
       std::vector<std::vector<std::string>>{{"train"}, {"bench", "parity"}, {"plan"}})
    EXPECT_EQ(help_line(c, "--batch_size").rfind("--batch_size,--batch-size INT", 0), 0u) << c[0];
}

}  // namespace
}  // namespace gpulab::train
