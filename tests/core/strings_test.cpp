// Tests string helpers and the Result/error mapping.
#include <gtest/gtest.h>

#include "core/duration.h"
#include "core/json.h"
#include "core/result.h"
#include "core/strings.h"

using namespace gpulab;

TEST(Strings, SplitTrimJoin) {
  EXPECT_EQ(split("a,,b", ',').size(), 2u);
  EXPECT_EQ(split("a,,b", ',', false).size(), 3u);
  EXPECT_EQ(trim("  x y \n"), "x y");
  EXPECT_EQ(join({"a", "b", "c"}, ", "), "a, b, c");
}

TEST(Strings, ShellWordsGroupQuotesAndRefuseAnOpenOne) {
  using W = std::vector<std::string>;
  EXPECT_EQ(split_shell_words("python3  score.py --field 'final answer'"),
            (W{"python3", "score.py", "--field", "final answer"}));
  EXPECT_EQ(split_shell_words("a \"b c\"d ''"), (W{"a", "b cd", ""}));
  EXPECT_EQ(split_shell_words("  "), W{});
  EXPECT_FALSE(split_shell_words("a 'b"));
}

TEST(Strings, PrintableKeepsAMessageOnOneLine) {
  EXPECT_EQ(printable("data/a b.txt"), "data/a b.txt");
  EXPECT_EQ(printable("caf\xc3\xa9/\xe6\x97\xa5"), "caf\xc3\xa9/\xe6\x97\xa5");  // UTF-8 kept
  EXPECT_EQ(printable("a\nb\r\tc"), "a\\nb\\r\\tc");
  EXPECT_EQ(printable(std::string("x\x1b[2Jy\x7f\0", 8)), "x\\x1b[2Jy\\x7f\\x00");
  EXPECT_EQ(printable(""), "");
}

TEST(Strings, ThousandsAsTheSeedPrints) {
  EXPECT_EQ(with_thousands(83090.856, 2), "83,090.86");
  EXPECT_EQ(with_thousands(6936.11, 2), "6,936.11");
  EXPECT_EQ(with_thousands(12.5, 1), "12.5");
}

TEST(Result, CarriesValueOrError) {
  Result<int> good = 5;
  Result<int> bad = Error{Code::kNotFound, "no such thing", "create it first"};
  EXPECT_TRUE(good.ok());
  EXPECT_EQ(*good, 5);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().to_string(), "no such thing (hint: create it first)");
  EXPECT_THROW((void)bad.value(), Exception);
}

TEST(Errors, MapToExitCodesAndHttp) {
  EXPECT_EQ(exit_code_for(Code::kInvalidArgument), 2);
  EXPECT_EQ(exit_code_for(Code::kDataError), 2);
  EXPECT_EQ(http_status_for(Code::kNotFound), 404);
  EXPECT_EQ(http_status_for(Code::kUnauthenticated), 401);
  EXPECT_EQ(code_name(Code::kResourceExhausted), "RESOURCE_EXHAUSTED");
}

TEST(Json, MalformedInputIsInvalidArgument) {
  auto ok = parse_json(R"({"a": 1})");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)["a"], 1);
  auto bad = parse_json("{\"a\": ", "request body");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Code::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("request body"), std::string::npos);
}

TEST(Duration, HumanDuration) {
  EXPECT_EQ(human_duration(0), "0s");
  EXPECT_EQ(human_duration(42.3), "42s");
  EXPECT_EQ(human_duration(185), "3m05s");
  EXPECT_EQ(human_duration(7384), "2h03m");
  EXPECT_EQ(human_duration(-5), "0s");
}
