#pragma once

// The reports' rendering check, shared by the tests of every page qtft draws.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/cli_runner.h"

namespace qtft::test {

// Rendered by Debian's chromium: every chart laid out with its marks (the page's own count),
// and a screenshot kept beside the build, as `shot_name`, for a person to look at.
inline void expect_renders_in_a_browser(const std::string& html, const std::string& shot_name) {
  const auto page = read_text(html);
  const std::string shot = std::string(QTFT_BUILD_DIR) + "/tests/" + shot_name;
  std::filesystem::remove(shot);
  const std::string browser =
      "chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,3200 "
      "--virtual-time-budget=5000 ";
  const std::string dom = html + ".dom";
  ASSERT_EQ(
      std::system((kHangGuard + " " + browser + "--dump-dom 'file://" + html + "' >'" + dom + "' 2>/dev/null").c_str()),
      0)
      << "is Debian's chromium installed? scripts/test.sh installs it";
  const auto rendered = read_text(dom);
  const auto at = page.find("data-charts=\"") + 13;
  const auto charts = page.substr(at, page.find('"', at) - at);  // how many the page drew
  EXPECT_NE(charts, "0");
  EXPECT_THAT(rendered, ::testing::HasSubstr("data-charts-rendered=\"" + charts + "\"")) << html;
  ASSERT_EQ(
      std::system(
          (kHangGuard + " " + browser + "--screenshot='" + shot + "' 'file://" + html + "' >/dev/null 2>&1").c_str()),
      0);
  ASSERT_TRUE(std::filesystem::exists(shot));
  EXPECT_GT(std::filesystem::file_size(shot), 20'000u);  // a page of charts, not a blank one
}

}  // namespace qtft::test
