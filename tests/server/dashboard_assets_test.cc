#include "server/dashboard_assets.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>

namespace sandgate::server {
namespace {

std::string HeaderValue(std::string_view name) {
  for (const auto& [k, v] : DashboardHeaders()) {
    if (k == name) return std::string(v);
  }
  return "";
}

TEST(DashboardFilesTest, ThePageIsServedAtTheRootAndUnderUi) {
  for (std::string_view path : {"/", "/ui", "/ui/", "/ui/index.html"}) {
    const EmbeddedFile* f = FindDashboardFile(path);
    ASSERT_NE(f, nullptr) << path;
    EXPECT_EQ(f->content_type, "text/html; charset=utf-8");
    EXPECT_NE(f->body.find("<title>sandgate</title>"), std::string_view::npos);
  }
  EXPECT_EQ(FindDashboardFile("/ui/nope.js"), nullptr);
  EXPECT_EQ(FindDashboardFile("/ui/../etc/passwd"), nullptr);
}

TEST(DashboardFilesTest, EveryFileThePageLoadsIsEmbeddedAndNothingComesFromElsewhere) {
  const EmbeddedFile* page = FindDashboardFile("/");
  ASSERT_NE(page, nullptr);
  std::string html(page->body);
  std::regex ref(R"re((?:src|href)="([^"#]+)")re");
  int refs = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), ref); it != std::sregex_iterator();
       ++it) {
    ++refs;
    std::string target = (*it)[1];
    EXPECT_NE(FindDashboardFile(target), nullptr) << target << " is not embedded";
  }
  EXPECT_GE(refs, 7);  // two style sheets and five scripts
  // Nothing is fetched from the internet: no absolute URL in the page or its own script.
  for (std::string_view path : {"/ui/index.html", "/ui/app.js", "/ui/style.css"}) {
    std::string body(FindDashboardFile(path)->body);
    EXPECT_EQ(body.find("http://"), std::string::npos) << path;
    EXPECT_EQ(body.find("https://"), std::string::npos) << path;
  }
  // The two libraries are the real ones, whole.
  EXPECT_GT(FindDashboardFile("/ui/vendor/marked.min.js")->body.size(), 20000u);
  EXPECT_NE(FindDashboardFile("/ui/vendor/purify.min.js")->body.find("DOMPurify"),
            std::string_view::npos);
  // The terminal's: xterm.js (bundled, whole), its style sheet and the fit addon.
  EXPECT_GT(FindDashboardFile("/ui/vendor/xterm.js")->body.size(), 300000u);
  EXPECT_NE(FindDashboardFile("/ui/vendor/xterm.css")->body.find(".xterm"), std::string_view::npos);
  EXPECT_NE(FindDashboardFile("/ui/vendor/addon-fit.js")->body.find("FitAddon"),
            std::string_view::npos);
}

TEST(DashboardFilesTest, ThePolicyAllowsOnlyTheDaemonsOwnScriptsAndNoInlineCode) {
  std::string csp = HeaderValue("Content-Security-Policy");
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos);
  EXPECT_NE(csp.find("script-src 'self'"), std::string::npos);
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos);
  EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos);
  EXPECT_EQ(csp.find("unsafe-eval"), std::string::npos);
  EXPECT_EQ(HeaderValue("X-Content-Type-Options"), "nosniff");
  // Images are the daemon's or data: URLs; never blob: ones, which are of the daemon's origin
  // when opened as a page (the chart, an SVG a sandbox wrote, would run its scripts there).
  EXPECT_NE(csp.find("img-src 'self' data:;"), std::string::npos) << csp;
  EXPECT_EQ(csp.find("blob:"), std::string::npos) << csp;
}

}  // namespace
}  // namespace sandgate::server
