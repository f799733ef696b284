// The web dashboard's files (daemon/server/dashboard/ and the two libraries it uses, marked
// and DOMPurify from Debian's libjs-marked and node-dompurify), compiled into the daemon, so
// it serves them with no file on disk and nothing is ever fetched from the internet.
//
//   const EmbeddedFile* f = FindDashboardFile("/ui/app.js");
//   if (f) Reply(200, f->content_type, f->body, DashboardHeaders());
//
// Constant; thread safe.
#ifndef SANDGATE_SERVER_DASHBOARD_ASSETS_H_
#define SANDGATE_SERVER_DASHBOARD_ASSETS_H_

#include <string_view>
#include <utility>
#include <vector>

namespace sandgate::server {

struct EmbeddedFile {
  std::string_view path;  // where it is served: "/ui/app.js"
  std::string_view content_type;
  std::string_view body;
};

// Every file, from the table cmake/embed_files.cmake generates.
const std::vector<EmbeddedFile>& DashboardFiles();

// The file served at `path`: "/", "/ui" and "/ui/" are the page itself; null for anything else.
const EmbeddedFile* FindDashboardFile(std::string_view path);

// The headers every dashboard response carries. The Content-Security-Policy allows scripts,
// styles and fetches from the daemon only, images from it and from data: URLs (the chart, shown
// from fetched bytes; never a blob: URL, which would be of the daemon's origin when opened as a
// page), and nothing else: no inline script or handler runs, the page cannot be framed, no form
// posts elsewhere. With nosniff and no-referrer.
const std::vector<std::pair<std::string_view, std::string_view>>& DashboardHeaders();

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_DASHBOARD_ASSETS_H_
