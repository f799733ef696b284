// What the verifier needs to know about a chart: is it well-formed SVG, how many titled panels
// it has, and whether it could run script or fetch anything.
//
// The panel rule (the contract asks for "four titled panels"; it is written into the agent's
// instructions too). A panel title is either
//   - a non-empty <title> whose parent is a <g> or a nested <svg>, or
//   - a non-empty <text> marked as a title: its class or id contains "title", or its
//     font-weight (attribute or inline style) is bold, bolder or 600-900,
// in both cases not a direct child of the root <svg> (that is the chart's own title). Separately,
// a titled group is a <g> or nested <svg> whose id or class names it a panel ("panel", "axes",
// "subplot", "chart", "plot"), not inside another such group, holding a non-empty <title> or
// <text>. The chart has max(panel titles, titled groups) panels.
//
// Scripts: a <script> or <foreignObject> element, an on* event attribute, or a javascript: URL.
// External references: an href (any namespace) not of the form "#fragment", a src attribute,
// an <image> (raster images are not allowed at all), url(...) not pointing at "#fragment" in an
// attribute or a <style>, @import in a <style>, an <?xml-stylesheet?>, an entity declaration
// (parsing stops there), or a DOCTYPE with an external identifier other than the standard SVG
// DTD ("-//W3C//DTD SVG ..." with no internal subset, which matplotlib writes and nothing
// fetches).
//
// Thread safe: a pure function. Never fails: a broken chart is a fact in the result.
#ifndef SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_SVG_CHECK_H_
#define SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_SVG_CHECK_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace sandgate::playbooks::financial {

struct SvgFacts {
  bool well_formed = false;
  std::string parse_error;  // "line L, column C: what", when not well formed
  std::string root;         // the root element's local name
  int panel_titles = 0;
  int titled_groups = 0;
  int panels() const { return panel_titles > titled_groups ? panel_titles : titled_groups; }
  // Each finding says what and at which line.
  std::vector<std::string> scripts;
  std::vector<std::string> external_refs;
};

SvgFacts InspectSvg(absl::string_view svg);

}  // namespace sandgate::playbooks::financial

#endif  // SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_SVG_CHECK_H_
