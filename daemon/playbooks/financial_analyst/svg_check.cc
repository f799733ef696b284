#include "playbooks/financial_analyst/svg_check.h"

#include <expat.h>

#include <algorithm>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "playbooks/financial_analyst/text.h"

namespace sandgate::playbooks::financial {
namespace {

// Expat takes an int length; the chart is fed in pieces of this size.
constexpr size_t kChunk = 1 << 20;
// Findings past this many are counted, not listed.
constexpr size_t kMaxFindings = 20;

struct Element {
  std::string name;              // local name, lower case
  bool panel_group = false;      // an outermost <g>/<svg> named as a panel
  bool title_candidate = false;  // a <title> or a marked <text> that counts when non-empty
  std::string text;              // character data, for <title>, <text> and <style>
};

struct State {
  XML_Parser parser = nullptr;
  SvgFacts* facts = nullptr;
  std::vector<Element> stack;
  int open_panel_group = -1;  // index into stack, or -1
  bool panel_group_titled = false;
  size_t dropped = 0;  // findings beyond kMaxFindings

  std::string Where() const { return absl::StrCat("line ", XML_GetCurrentLineNumber(parser)); }
  void Add(std::vector<std::string>* list, const std::string& what) {
    if (list->size() < kMaxFindings) {
      list->push_back(absl::StrCat(what, " at ", Where()));
    } else {
      ++dropped;
    }
  }
};

std::string LocalName(const char* name) {
  absl::string_view n(name);
  size_t colon = n.rfind(':');
  if (colon != absl::string_view::npos) n.remove_prefix(colon + 1);
  return absl::AsciiStrToLower(n);
}

bool IsBold(absl::string_view weight) {
  weight = absl::StripAsciiWhitespace(weight);
  if (absl::EqualsIgnoreCase(weight, "bold") || absl::EqualsIgnoreCase(weight, "bolder")) {
    return true;
  }
  int numeric = 0;
  return absl::SimpleAtoi(weight, &numeric) && numeric >= 600;
}

// The value of `property` in an inline style ("a: b; font-weight: bold").
std::string StyleProperty(absl::string_view style, absl::string_view property) {
  for (absl::string_view decl : absl::StrSplit(style, ';')) {
    size_t colon = decl.find(':');
    if (colon == absl::string_view::npos) continue;
    if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(decl.substr(0, colon)), property)) {
      return std::string(absl::StripAsciiWhitespace(decl.substr(colon + 1)));
    }
  }
  return "";
}

bool NamesAPanel(absl::string_view id_or_class) {
  std::string lower = absl::AsciiStrToLower(id_or_class);
  for (absl::string_view word : {"panel", "axes", "subplot", "chart", "plot"}) {
    if (absl::StrContains(lower, word)) return true;
  }
  return false;
}

// Every url(...) in `text` that does not point at a fragment.
void CheckUrls(State* s, absl::string_view text, absl::string_view where) {
  std::string lower = absl::AsciiStrToLower(text);
  for (size_t at = lower.find("url("); at != std::string::npos; at = lower.find("url(", at + 4)) {
    size_t i = at + 4;
    while (i < lower.size() &&
           (absl::ascii_isspace(lower[i]) || lower[i] == '"' || lower[i] == '\'')) {
      ++i;
    }
    if (i >= lower.size() || lower[i] != '#') {
      s->Add(&s->facts->external_refs,
             absl::StrCat("url(", Excerpt(text.substr(i < text.size() ? i : text.size()), 40),
                          ") in ", where));
    }
  }
  if (absl::StrContains(lower, "@import")) {
    s->Add(&s->facts->external_refs, absl::StrCat("@import in ", where));
  }
}

void XMLCALL OnStart(void* data, const XML_Char* name, const XML_Char** atts) {
  auto* s = static_cast<State*>(data);
  Element e;
  e.name = LocalName(name);
  if (s->stack.empty()) s->facts->root = e.name;
  const std::string element = absl::StrCat("<", Excerpt(name, 40), ">");
  if (e.name == "script" || e.name == "foreignobject") s->Add(&s->facts->scripts, element);
  if (e.name == "image") s->Add(&s->facts->external_refs, absl::StrCat("raster image ", element));

  std::string id_class, weight, style;
  for (int i = 0; atts[i] != nullptr; i += 2) {
    std::string attr = LocalName(atts[i]);
    absl::string_view value = atts[i + 1];
    absl::string_view trimmed = absl::StripAsciiWhitespace(value);
    std::string on = absl::StrCat(Excerpt(atts[i], 40), " on ", element);
    if (absl::StartsWith(attr, "on"))
      s->Add(&s->facts->scripts, absl::StrCat("event handler ", on));
    if (absl::StartsWithIgnoreCase(trimmed, "javascript:")) {
      s->Add(&s->facts->scripts, absl::StrCat("javascript: URL in ", on));
    } else if (attr == "href" && !absl::StartsWith(trimmed, "#")) {
      s->Add(&s->facts->external_refs,
             absl::StrCat("reference \"", Excerpt(trimmed, 60), "\" in ", on));
    }
    if (attr == "src") s->Add(&s->facts->external_refs, absl::StrCat("src attribute on ", element));
    CheckUrls(s, value, absl::StrCat("attribute ", on));
    if (attr == "id" || attr == "class") absl::StrAppend(&id_class, " ", value);
    if (attr == "font-weight") weight = std::string(value);
    if (attr == "style") style = std::string(value);
  }
  if (weight.empty()) weight = StyleProperty(style, "font-weight");

  bool under_root = s->stack.size() == 1;
  const std::string parent = s->stack.empty() ? "" : s->stack.back().name;
  if (e.name == "title") {
    e.title_candidate = !under_root && (parent == "g" || parent == "svg");
  } else if (e.name == "text") {
    e.title_candidate =
        !under_root &&
        (absl::StrContains(absl::AsciiStrToLower(id_class), "title") || IsBold(weight));
  }
  if ((e.name == "g" || (e.name == "svg" && !s->stack.empty())) && s->open_panel_group < 0 &&
      NamesAPanel(id_class)) {
    e.panel_group = true;
    s->open_panel_group = static_cast<int>(s->stack.size());
    s->panel_group_titled = false;
  }
  s->stack.push_back(std::move(e));
}

void XMLCALL OnEnd(void* data, const XML_Char* /*name*/) {
  auto* s = static_cast<State*>(data);
  if (s->stack.empty()) return;
  Element e = std::move(s->stack.back());
  s->stack.pop_back();
  bool has_text = !absl::StripAsciiWhitespace(e.text).empty();
  if (e.title_candidate && has_text) ++s->facts->panel_titles;
  if ((e.name == "title" || e.name == "text") && has_text) s->panel_group_titled = true;
  if (e.name == "style") CheckUrls(s, e.text, "<style>");
  // Text nested in a <text> (a <tspan>) belongs to it.
  if (!s->stack.empty() && (e.name == "tspan" || e.name == "textpath" || e.name == "a")) {
    s->stack.back().text += e.text;
  }
  if (e.panel_group) {
    if (s->panel_group_titled) ++s->facts->titled_groups;
    s->open_panel_group = -1;
  }
}

void XMLCALL OnText(void* data, const XML_Char* text, int len) {
  auto* s = static_cast<State*>(data);
  if (s->stack.empty()) return;
  Element& e = s->stack.back();
  if (e.name == "title" || e.name == "text" || e.name == "style" || e.name == "tspan" ||
      e.name == "textpath" || e.name == "a") {
    e.text.append(text, static_cast<size_t>(len));
  }
}

void XMLCALL OnDoctype(void* data, const XML_Char* /*name*/, const XML_Char* sysid,
                       const XML_Char* pubid, int has_internal_subset) {
  auto* s = static_cast<State*>(data);
  if (sysid == nullptr && pubid == nullptr) return;
  bool svg_dtd =
      pubid != nullptr && absl::StartsWith(pubid, "-//W3C//DTD SVG") && !has_internal_subset;
  if (!svg_dtd) {
    s->Add(&s->facts->external_refs,
           absl::StrCat("DOCTYPE with external identifier \"",
                        Excerpt(sysid != nullptr ? sysid : pubid, 60), "\""));
  }
}

void XMLCALL OnEntity(void* data, const XML_Char* name, int /*is_parameter*/,
                      const XML_Char* /*value*/, int /*value_length*/, const XML_Char* /*base*/,
                      const XML_Char* /*sysid*/, const XML_Char* /*pubid*/,
                      const XML_Char* /*notation*/) {
  auto* s = static_cast<State*>(data);
  s->Add(&s->facts->external_refs,
         absl::StrCat("entity declaration \"", Excerpt(name, 40), "\" (parsing stopped)"));
  XML_StopParser(s->parser, XML_FALSE);
}

void XMLCALL OnProcessingInstruction(void* data, const XML_Char* target,
                                     const XML_Char* /*pi_data*/) {
  auto* s = static_cast<State*>(data);
  if (absl::EqualsIgnoreCase(target, "xml-stylesheet")) {
    s->Add(&s->facts->external_refs, "<?xml-stylesheet?> processing instruction");
  }
}

}  // namespace

SvgFacts InspectSvg(absl::string_view svg) {
  SvgFacts facts;
  std::unique_ptr<XML_ParserStruct, void (*)(XML_Parser)> parser(XML_ParserCreate(nullptr),
                                                                 XML_ParserFree);
  if (parser == nullptr) {
    facts.parse_error = "out of memory creating the XML parser";
    return facts;
  }
  State state;
  state.parser = parser.get();
  state.facts = &facts;
  XML_SetUserData(parser.get(), &state);
  XML_SetElementHandler(parser.get(), OnStart, OnEnd);
  XML_SetCharacterDataHandler(parser.get(), OnText);
  XML_SetStartDoctypeDeclHandler(parser.get(), OnDoctype);
  XML_SetEntityDeclHandler(parser.get(), OnEntity);
  XML_SetProcessingInstructionHandler(parser.get(), OnProcessingInstruction);

  bool ok = true;
  size_t offset = 0;
  do {
    size_t n = std::min(kChunk, svg.size() - offset);
    bool last = offset + n == svg.size();
    if (XML_Parse(parser.get(), svg.data() + offset, static_cast<int>(n), last) != XML_STATUS_OK) {
      ok = false;
      break;
    }
    offset += n;
  } while (offset < svg.size());

  if (state.dropped > 0) {
    for (std::vector<std::string>* list : {&facts.scripts, &facts.external_refs}) {
      if (list->size() >= kMaxFindings) {
        list->push_back(absl::StrCat("(", state.dropped, " more findings not listed)"));
      }
    }
  }
  if (!ok) {
    XML_Error code = XML_GetErrorCode(parser.get());
    facts.parse_error =
        absl::StrCat("line ", XML_GetCurrentLineNumber(parser.get()), ", column ",
                     XML_GetCurrentColumnNumber(parser.get()), ": ",
                     code == XML_ERROR_ABORTED ? "declares an entity, which is not allowed"
                                               : XML_ErrorString(code));
    return facts;
  }
  facts.well_formed = true;
  if (facts.root != "svg") {
    facts.well_formed = false;
    facts.parse_error =
        absl::StrCat("the root element is <", Excerpt(facts.root, 40), ">, not <svg>");
  }
  return facts;
}

}  // namespace sandgate::playbooks::financial
