// The two Store implementations as the contract suite (store_contract_test.cc) opens them:
// a fresh empty database per test, and any number of store instances on it, as replicas
// sharing one database would be.
#ifndef SANDGATE_TESTS_STORE_STORE_BACKENDS_H_
#define SANDGATE_TESTS_STORE_STORE_BACKENDS_H_

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "store/store.h"

namespace sandgate::store::testing {

class Backend {
 public:
  virtual ~Backend() = default;
  // Another store instance on this backend's database.
  virtual absl::StatusOr<std::unique_ptr<Store>> Open() = 0;
};

struct BackendKind {
  std::string name;  // "sqlite", "postgres"
  // A backend on a fresh, empty database.
  std::function<std::unique_ptr<Backend>()> make;
  // gtest names a failing case's parameter by this, not by its bytes.
  friend void PrintTo(const BackendKind& kind, std::ostream* os) { *os << kind.name; }
};

BackendKind Sqlite();
BackendKind Postgres();  // on tests/fakes' shared PostgresServer

}  // namespace sandgate::store::testing

#endif  // SANDGATE_TESTS_STORE_STORE_BACKENDS_H_
