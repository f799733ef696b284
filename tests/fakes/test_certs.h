// TestCertificates: a throwaway PKI for TLS tests, made with the `openssl` CLI into a
// directory the test owns: a CA, two server certificates it signs (SAN 127.0.0.1 and
// localhost; the second one for rotation), a client certificate it signs, and a "stranger"
// client certificate signed by a CA nobody trusts. Keys are P-256, unencrypted, valid for
// two days. The server certificates carry serverAuth and clientAuth (a replica presents its
// own certificate when it calls another).
//
//   absl::StatusOr<TestCertificates> certs = TestCertificates::Create(dir);  // or TlsFixture
//   ASSERT_TRUE(certs.ok()) << certs.status();
//   config["tls"] = {{"cert_file", certs->server.cert}, {"key_file", certs->server.key}};
//
// A value; Create runs openssl (seconds at most) and is safe to call from several tests.
#ifndef SANDGATE_TESTS_FAKES_TEST_CERTS_H_
#define SANDGATE_TESTS_FAKES_TEST_CERTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tests/common/temp_dir.h"

namespace sandgate::testing {

struct TestCertificates {
  struct Pair {
    std::string cert;  // PEM file
    std::string key;   // PEM file
  };
  std::string ca;  // the CA's certificate (PEM file): verifies all but the stranger
  Pair server;     // serial 1001
  Pair server2;    // serial 1002, same names
  Pair client;     // CN sandgate-test-client
  Pair stranger;   // signed by another CA

  // Writes everything under `dir` (which must exist). INTERNAL with openssl's output when a
  // command fails.
  static absl::StatusOr<TestCertificates> Create(const std::string& dir);
};

// The whole of a file, or "" when it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);

// Puts `pair` at `cert` and `key` the way a certificate renewer replaces them: each copied
// beside its place and renamed over it (key first), so a reader never sees half a file.
void InstallPair(const TestCertificates::Pair& pair, const std::string& cert,
                 const std::string& key);

// A fixture with a fresh PKI (certs_) in a temp directory of its own (tmp_), removed after.
class TlsFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tmp_.ok());
    absl::StatusOr<TestCertificates> certs = TestCertificates::Create(tmp_.path());
    ASSERT_TRUE(certs.ok()) << certs.status();
    certs_ = *certs;
  }

  ScopedTempDir tmp_{"sandgate-tls"};
  TestCertificates certs_;
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_TEST_CERTS_H_
