#include "playbooks/financial_analyst/svg_check.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandgate::playbooks::financial {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string Svg(const std::string& body, const std::string& prolog = "") {
  return absl::StrCat(prolog,
                      "<svg xmlns=\"http://www.w3.org/2000/svg\" "
                      "xmlns:xlink=\"http://www.w3.org/1999/xlink\">",
                      body, "</svg>");
}

std::string Panels(int n, const std::string& title_markup) {
  std::string out;
  for (int i = 0; i < n; ++i) absl::StrAppend(&out, "<g>", title_markup, "<rect/></g>");
  return out;
}

TEST(SvgCheckTest, CountsPanelTitles) {
  // Like the reference program: <text class="panel-title"> in each <g class="panel">, plus a
  // chart title and tooltips that do not count.
  std::string body = "<title>Chart</title><text font-weight=\"bold\">All</text>";
  for (int i = 0; i < 4; ++i) {
    absl::StrAppend(&body, "<g class=\"panel\"><text class=\"panel-title\">P", i,
                    "</text><circle><title>tip</title></circle></g>");
  }
  SvgFacts f = InspectSvg(Svg(body));
  EXPECT_TRUE(f.well_formed) << f.parse_error;
  EXPECT_EQ(f.panel_titles, 4);
  EXPECT_EQ(f.titled_groups, 4);
  EXPECT_EQ(f.panels(), 4);
  EXPECT_THAT(f.scripts, IsEmpty());
  EXPECT_THAT(f.external_refs, IsEmpty());

  EXPECT_EQ(InspectSvg(Svg(Panels(4, "<title>T</title>"))).panels(), 4);
  EXPECT_EQ(InspectSvg(Svg(Panels(4, "<text style=\"font-weight: 700\">T</text>"))).panels(), 4);
  EXPECT_EQ(InspectSvg(Svg(Panels(3, "<title>T</title>"))).panels(), 3);
  EXPECT_EQ(InspectSvg(Svg(Panels(4, "<title>  </title>"))).panels(), 0);
  EXPECT_EQ(InspectSvg(Svg(Panels(4, "<text>plain label</text>"))).panels(), 0);
  // matplotlib-style axes groups with plain text.
  std::string axes;
  for (int i = 1; i <= 4; ++i) {
    absl::StrAppend(&axes, "<g id=\"axes_", i,
                    "\"><g id=\"text_1\"><text>T<tspan>x</tspan></text></g></g>");
  }
  EXPECT_EQ(InspectSvg(Svg(axes)).titled_groups, 4);
}

TEST(SvgCheckTest, FindsScripts) {
  for (const std::string& body :
       {std::string("<script>alert(1)</script>"), std::string("<rect onclick=\"x()\"/>"),
        std::string("<svg:script xmlns:svg=\"http://www.w3.org/2000/svg\"/>"),
        std::string("<a href=\" javascript:alert(1)\"><text>x</text></a>"),
        std::string(
            "<foreignObject><div xmlns=\"http://www.w3.org/1999/xhtml\"/></foreignObject>")}) {
    SvgFacts f = InspectSvg(Svg(body));
    EXPECT_TRUE(f.well_formed) << body << ": " << f.parse_error;
    EXPECT_FALSE(f.scripts.empty()) << body;
  }
  EXPECT_THAT(InspectSvg(Svg("<rect onload=\"x()\"/>")).scripts[0], HasSubstr("onload"));
}

TEST(SvgCheckTest, FindsExternalReferences) {
  for (const std::string& body :
       {std::string("<a href=\"https://example.com\"><text>x</text></a>"),
        std::string("<use xlink:href=\"other.svg#a\"/>"),
        std::string("<image href=\"data:image/png;base64,AAAA\"/>"),
        std::string("<rect fill=\"url(http://evil/x)\"/>"),
        std::string("<rect style=\"fill: url( 'https://evil/x' )\"/>"),
        std::string("<style>@import url(#ok); rect { fill: red }</style>"),
        std::string("<style>rect { background: URL(http://e/x.png) }</style>")}) {
    SvgFacts f = InspectSvg(Svg(body));
    EXPECT_TRUE(f.well_formed) << body << ": " << f.parse_error;
    EXPECT_FALSE(f.external_refs.empty()) << body;
  }
  SvgFacts ok = InspectSvg(
      Svg("<defs><linearGradient id=\"g\"/><path id=\"p\"/></defs><use xlink:href=\"#p\"/>"
          "<rect fill=\"url(#g)\" style=\"fill:url( '#g')\"/><style>rect{fill:url(#g)}</style>"));
  EXPECT_THAT(ok.external_refs, IsEmpty());
  EXPECT_THAT(InspectSvg("<?xml-stylesheet href=\"http://e/s.css\"?>" + Svg("")).external_refs,
              testing::Not(IsEmpty()));
}

TEST(SvgCheckTest, DoctypeAndEntities) {
  // matplotlib writes the standard SVG DTD; nothing fetches it.
  SvgFacts dtd = InspectSvg(Svg("",
                                "<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" "
                                "\"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\">"));
  EXPECT_TRUE(dtd.well_formed) << dtd.parse_error;
  EXPECT_THAT(dtd.external_refs, IsEmpty());
  SvgFacts system = InspectSvg(Svg("", "<!DOCTYPE svg SYSTEM \"http://evil/x.dtd\">"));
  EXPECT_THAT(system.external_refs, testing::Not(IsEmpty()));
  // An entity declaration stops the parse (no expansion, external or internal).
  SvgFacts xxe = InspectSvg(
      Svg("<text>&x;</text>", "<!DOCTYPE svg [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"));
  EXPECT_FALSE(xxe.well_formed);
  EXPECT_THAT(xxe.parse_error, HasSubstr("entity"));
  std::string laughs = "<!DOCTYPE svg [<!ENTITY a \"aaaaaaaaaa\">";
  for (char c = 'b'; c <= 'j'; ++c) {
    std::string value;
    for (int i = 0; i < 10; ++i) absl::StrAppend(&value, "&", std::string(1, c - 1), ";");
    absl::StrAppend(&laughs, "<!ENTITY ", std::string(1, c), " \"", value, "\">");
  }
  absl::StrAppend(&laughs, "]>");
  EXPECT_FALSE(InspectSvg(Svg("<text>&j;</text>", laughs)).well_formed);
}

TEST(SvgCheckTest, MalformedAndWrongRoot) {
  SvgFacts f = InspectSvg("<svg><g></svg>");
  EXPECT_FALSE(f.well_formed);
  EXPECT_THAT(f.parse_error, HasSubstr("line 1"));
  EXPECT_FALSE(InspectSvg("").well_formed);
  EXPECT_FALSE(InspectSvg("not xml at all").well_formed);
  SvgFacts html = InspectSvg("<html><body/></html>");
  EXPECT_FALSE(html.well_formed);
  EXPECT_THAT(html.parse_error, HasSubstr("<html>"));
  // Deep nesting does not exhaust the stack.
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "<g>";
  for (int i = 0; i < 100000; ++i) deep += "</g>";
  EXPECT_TRUE(InspectSvg(Svg(deep)).well_formed);
}

}  // namespace
}  // namespace sandgate::playbooks::financial
