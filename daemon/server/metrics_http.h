// MetricsHttpServer: serves GET /metrics (Prometheus text format) on a TCP address.
//
// Deliberately tiny: one thread, one request per connection, bounded reads and timeouts; it
// serves nothing but the metrics page, so it needs no HTTP library.
//
// Thread safe. Stop() (or destruction) ends the thread.
#ifndef SANDGATE_SERVER_METRICS_HTTP_H_
#define SANDGATE_SERVER_METRICS_HTTP_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace sandgate::server {

class MetricsHttpServer {
 public:
  // `address` is "host:port" (port 0 = any free port); `render` produces the page.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& address, std::function<std::string()> render);
  ~MetricsHttpServer();
  int port() const { return port_; }
  void Stop();

 private:
  MetricsHttpServer(UniqueFd listener, UniqueFd stop, int port,
                    std::function<std::string()> render);
  void Loop();
  void Serve(int fd);

  UniqueFd listener_;
  UniqueFd stop_;  // eventfd
  const int port_;
  const std::function<std::string()> render_;
  std::thread thread_;
};

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_METRICS_HTTP_H_
