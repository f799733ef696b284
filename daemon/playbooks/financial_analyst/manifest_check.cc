#include "playbooks/financial_analyst/manifest_check.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "playbooks/financial_analyst/check_result.h"
#include "playbooks/financial_analyst/text.h"
#include "playbooks/financial_analyst/verifier.h"

namespace sandgate::playbooks::financial {
namespace {

using json = nlohmann::json;

std::optional<int64_t> IntegerJson(const json& j) {
  if (j.is_number_integer()) return j.get<int64_t>();
  if (j.is_number_unsigned()) {
    uint64_t u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (j.is_number_float()) {
    double d = j.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) <= 1e15) {
      return static_cast<int64_t>(d);
    }
  }
  return std::nullopt;
}

// A JSON value for a message, bounded in depth and length (dump() recurses without limit and
// throws on invalid UTF-8).
std::string JsonText(const json& j, int depth = 0) {
  if (j.is_array() || j.is_object()) {
    if (depth >= 2 || j.size() > 20) return j.is_array() ? "[...]" : "{...}";
    std::vector<std::string> parts;
    for (auto it = j.begin(); it != j.end(); ++it) {
      std::string value = JsonText(it.value(), depth + 1);
      parts.push_back(j.is_array() ? value
                                   : absl::StrCat("\"", Excerpt(it.key(), 40), "\": ", value));
    }
    std::string body = absl::StrJoin(parts, ", ");
    return Excerpt(j.is_array() ? absl::StrCat("[", body, "]") : absl::StrCat("{", body, "}"), 200);
  }
  return Excerpt(j.dump(-1, ' ', false, json::error_handler_t::replace), 80);
}

// obj[key] for reading: null when obj is not an object or lacks the key (operator[] on a
// const json is undefined for a missing key).
const json& Field(const json& obj, const std::string& key) {
  static const json* const kNull = new json();
  if (!obj.is_object()) return *kNull;
  auto it = obj.find(key);
  return it == obj.end() ? *kNull : *it;
}

// The manifest's validation_results against the daemon's, key by key.
std::vector<std::string> CompareValidation(const json& got, const ValidationReport& want) {
  std::vector<std::string> problems;
  json mine = want.ToJson();
  auto differs = [&](const std::string& key, const std::string& found) {
    problems.push_back(
        absl::StrCat(key, ": manifest has ", found, ", the daemon found ", JsonText(mine[key])));
  };
  auto compare_bool = [&](const std::string& key) {
    const json& v = Field(got, key);
    if (!v.is_boolean() || v.get<bool>() != mine[key].get<bool>()) differs(key, JsonText(v));
  };
  auto compare_strings = [&](const std::string& key) {
    const json& v = Field(got, key);
    std::set<std::string> found;
    bool ok = v.is_array();
    for (const json& e : ok ? v : json::array()) {
      if (e.is_string()) {
        found.insert(e.get<std::string>());
      } else {
        ok = false;
      }
    }
    std::set<std::string> expected = mine[key].get<std::set<std::string>>();
    if (!ok || found != expected) differs(key, JsonText(v));
  };
  auto compare_years = [&](const std::string& key) {
    const json& v = Field(got, key);
    std::set<int64_t> found;
    bool ok = v.is_array();
    for (const json& e : ok ? v : json::array()) {
      std::optional<int64_t> y = IntegerJson(e);
      if (y.has_value()) {
        found.insert(*y);
      } else {
        ok = false;
      }
    }
    std::set<int64_t> expected(want.accounting_equation_failures.begin(),
                               want.accounting_equation_failures.end());
    if (!ok || found != expected) differs(key, JsonText(v));
  };
  auto compare_bad_cells = [&](const std::string& key) {
    const json& v = Field(got, key);
    using Cell = std::tuple<int64_t, std::string, std::string>;
    std::set<Cell> found, expected;
    bool ok = v.is_array();
    for (const json& e : ok ? v : json::array()) {
      std::optional<int64_t> row = IntegerJson(Field(e, "row"));
      const json& column = Field(e, "column");
      const json& value = Field(e, "value");
      if (!row.has_value() || !column.is_string() || !value.is_string()) {
        ok = false;
        continue;
      }
      found.emplace(*row, column.get<std::string>(), value.get<std::string>());
    }
    for (const BadCell& c : want.bad_cells) expected.emplace(c.row, c.column, c.value);
    if (want.bad_cell_count > want.bad_cells.size()) {
      // The daemon listed only the first cells: those must be there, and as many in all,
      // either listed or (the contract's bound on the manifest's size) counted in
      // bad_cell_count next to the first kMaxBadCells.
      std::optional<int64_t> count = IntegerJson(Field(got, "bad_cell_count"));
      bool counted = count == std::optional<int64_t>(want.bad_cell_count) && found == expected;
      bool listed = v.size() == want.bad_cell_count &&
                    std::includes(found.begin(), found.end(), expected.begin(), expected.end());
      ok = ok && (counted || listed);
    } else {
      ok = ok && found == expected;
    }
    if (!ok) differs(key, JsonText(v));
  };

  compare_bool("required_columns_present");
  compare_strings("missing_columns");
  compare_bool("all_values_numeric");
  compare_bad_cells("bad_cells");
  compare_bool("years_unique");
  // After a fatal failure only the fatal keys are compared: which rows a program still looks
  // at once it knows the input is unusable is not part of the contract.
  if (!want.fatal()) {
    compare_bool("years_ordered");
    compare_bool("accounting_equation_passed_every_row");
    compare_years("accounting_equation_failures");
    compare_bool("at_least_two_years");
  }
  return problems;
}

}  // namespace

void CheckManifest(absl::string_view input_filename, absl::string_view text,
                   const ValidationReport& report, std::vector<Check>* out) {
  json manifest = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> problems;
  if (manifest.is_discarded()) {
    problems.push_back("not valid JSON");
  } else if (!manifest.is_object()) {
    problems.push_back(absl::StrCat("not a JSON object: ", JsonText(manifest)));
  }
  out->push_back(Result("analysis_run.parses", problems, "a JSON object"));
  if (!problems.empty()) return;

  // Keys and their types.
  problems.clear();
  auto has = [&](const char* key, bool (json::*is)() const noexcept, const char* type) {
    if (!manifest.contains(key)) {
      problems.push_back(absl::StrCat("missing key ", key));
      return false;
    }
    if (!(manifest[key].*is)()) {
      problems.push_back(absl::StrCat(key, " is not ", type, ": ", JsonText(manifest[key])));
      return false;
    }
    return true;
  };
  bool has_name = has("input_filename", &json::is_string, "a string");
  bool has_rows = has("row_count", &json::is_number, "a number");
  bool has_range = manifest.contains("year_range");
  if (!has_range) problems.push_back("missing key year_range");
  bool has_results = has("validation_results", &json::is_object, "an object");
  bool has_generated = has("generated_filenames", &json::is_array, "an array");
  has("execution_directory", &json::is_string, "a string");
  if (has_results) {
    for (const std::string& key : ValidationKeys()) {
      if (!manifest["validation_results"].contains(key)) {
        problems.push_back(absl::StrCat("validation_results lacks ", key));
      }
    }
  }
  out->push_back(Result("analysis_run.keys", problems, "every key, with the right types"));

  if (has_name) {
    problems.clear();
    std::string name = manifest["input_filename"].get<std::string>();
    if (name != input_filename) {
      problems.push_back(absl::StrCat("input_filename is \"", Excerpt(name, 80), "\", expected \"",
                                      Excerpt(input_filename, 80), "\""));
    }
    out->push_back(Result("analysis_run.input_filename", problems, "names the input"));
  }
  if (has_rows) {
    problems.clear();
    std::optional<int64_t> rows = IntegerJson(manifest["row_count"]);
    if (rows != std::optional<int64_t>(report.row_count)) {
      problems.push_back(absl::StrCat("row_count is ", JsonText(manifest["row_count"]),
                                      ", the input has ", report.row_count, " data rows"));
    }
    out->push_back(
        Result("analysis_run.row_count", problems, absl::StrCat(report.row_count, " rows")));
  }
  if (has_range) {
    problems.clear();
    const json& range = manifest["year_range"];
    std::string expected =
        report.year_range.has_value()
            ? absl::StrCat("[", report.year_range->first, ", ", report.year_range->second, "]")
            : "null";
    bool ok;
    if (report.year_range.has_value()) {
      ok = range.is_array() && range.size() == 2 &&
           IntegerJson(range[0]) == std::optional<int64_t>(report.year_range->first) &&
           IntegerJson(range[1]) == std::optional<int64_t>(report.year_range->second);
    } else {
      ok = range.is_null();
    }
    if (!ok) {
      problems.push_back(absl::StrCat("year_range is ", JsonText(range), ", expected ", expected));
    }
    out->push_back(Result("analysis_run.year_range", problems, expected));
  }
  if (has_results) {
    out->push_back(Result("analysis_run.validation_matches",
                          CompareValidation(manifest["validation_results"], report),
                          "validation_results agree with the daemon's"));
  }
  if (has_generated && !report.fatal()) {
    problems.clear();
    std::set<std::string> listed;
    for (const json& e : manifest["generated_filenames"]) {
      if (e.is_string()) listed.insert(e.get<std::string>());
    }
    std::vector<std::string> missing;
    for (const std::string& name : ArtifactNames()) {
      if (name != kManifestFile && !listed.count(name)) missing.push_back(name);
    }
    if (!missing.empty()) {
      problems.push_back(absl::StrCat("generated_filenames lacks ", absl::StrJoin(missing, ", ")));
    }
    out->push_back(
        Result("analysis_run.generated_filenames", problems, "lists the generated files"));
  }
}

}  // namespace sandgate::playbooks::financial
