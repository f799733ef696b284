#include "common/tls.h"

#include <fstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/fakes/test_certs.h"

namespace sandgate {
namespace {

const TlsFileNames kNames = {"tls.cert_file", "tls.key_file", "tls.client_ca_file"};

class TlsFilesTest : public testing::TlsFixture {
 protected:
  // The error's message, or "ok".
  std::string Error(const TlsFiles& files) {
    absl::StatusOr<TlsPem> pem = ReadTlsFiles(files, kNames);
    if (pem.ok()) return "ok";
    EXPECT_EQ(pem.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(pem.status().message());
  }
};

TEST_F(TlsFilesTest, AGoodSetIsReadWhole) {
  absl::StatusOr<TlsPem> pem =
      ReadTlsFiles({certs_.server.cert, certs_.server.key, certs_.ca}, kNames);
  ASSERT_TRUE(pem.ok()) << pem.status();
  EXPECT_EQ(pem->cert_chain, testing::ReadFileOrEmpty(certs_.server.cert));
  EXPECT_EQ(pem->private_key, testing::ReadFileOrEmpty(certs_.server.key));
  EXPECT_EQ(pem->ca, testing::ReadFileOrEmpty(certs_.ca));
  EXPECT_EQ(Error({"", "", certs_.ca}), "ok") << "a CA alone: a client without a certificate";
}

TEST_F(TlsFilesTest, EachWrongFileIsNamedWithWhatIsWrong) {
  const std::string missing = tmp_.path() + "/missing.pem";
  const std::string garbage = tmp_.path() + "/garbage.pem";
  std::ofstream(garbage) << "not a certificate\n";
  const struct {
    TlsFiles files;
    std::string expect;
  } cases[] = {
      {{missing, certs_.server.key, ""},
       "tls.cert_file: " + missing + " cannot be read (No such file or directory)"},
      {{garbage, certs_.server.key, ""}, "tls.cert_file: " + garbage + " holds no PEM certificate"},
      // A key where the certificate belongs, a classic slip.
      {{certs_.server.key, certs_.server.key, ""}, "holds no PEM certificate"},
      {{certs_.server.cert, missing, ""}, "tls.key_file: " + missing + " cannot be read"},
      {{certs_.server.cert, certs_.server.cert, ""},
       "tls.key_file: " + certs_.server.cert + " holds no unencrypted PEM private key"},
      {{certs_.server.cert, certs_.server2.key, ""},
       "tls.key_file: " + certs_.server2.key + " does not match the certificate in " +
           certs_.server.cert},
      {{certs_.server.cert, certs_.server.key, garbage},
       "tls.client_ca_file: " + garbage + " holds no PEM certificate"},
      {{certs_.server.cert, "", ""}, "tls.cert_file and tls.key_file: set both"},
  };
  for (const auto& c : cases) {
    std::string error = Error(c.files);
    EXPECT_TRUE(absl::StrContains(error, c.expect)) << error << "\nexpected: " << c.expect;
  }
}

}  // namespace
}  // namespace sandgate
