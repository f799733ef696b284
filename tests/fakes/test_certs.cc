#include "tests/fakes/test_certs.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sandgate::testing {
namespace {

// Runs a shell command; its output (both streams) in the error when it fails.
absl::Status Run(const std::string& command) {
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return absl::InternalError(absl::StrCat("cannot run: ", command));
  std::string out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  int status = pclose(p);
  if (status != 0) return absl::InternalError(absl::StrCat(command, " failed:\n", out));
  return absl::OkStatus();
}

constexpr char kKey[] = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

absl::Status MakeCa(const std::string& dir, const std::string& name) {
  return Run(absl::StrCat("openssl req -x509 ", kKey, " -days 2 -subj /CN=", name, " -keyout ", dir,
                          "/", name, ".key -out ", dir, "/", name, ".pem",
                          " -addext basicConstraints=critical,CA:TRUE",
                          " -addext keyUsage=critical,keyCertSign,cRLSign"));
}

// A certificate for `name` signed by the CA `ca`, with the extensions in `ext`.
absl::Status MakeLeaf(const std::string& dir, const std::string& ca, const std::string& name,
                      const std::string& cn, int serial, const std::string& ext) {
  const std::string base = absl::StrCat(dir, "/", name);
  { std::ofstream(base + ".ext") << ext; }
  if (absl::Status s = Run(absl::StrCat("openssl req ", kKey, " -subj /CN=", cn, " -keyout ", base,
                                        ".key -out ", base, ".csr"));
      !s.ok()) {
    return s;
  }
  return Run(absl::StrCat("openssl x509 -req -days 2 -in ", base, ".csr -CA ", dir, "/", ca,
                          ".pem -CAkey ", dir, "/", ca, ".key -set_serial ", serial, " -extfile ",
                          base, ".ext -out ", base, ".pem"));
}

}  // namespace

absl::StatusOr<TestCertificates> TestCertificates::Create(const std::string& dir) {
  constexpr char kServerExt[] =
      "basicConstraints=CA:FALSE\n"
      "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
      "extendedKeyUsage=serverAuth,clientAuth\n";
  constexpr char kClientExt[] =
      "basicConstraints=CA:FALSE\n"
      "extendedKeyUsage=clientAuth\n";
  for (absl::Status s : {
           MakeCa(dir, "ca"),
           MakeCa(dir, "other-ca"),
           MakeLeaf(dir, "ca", "server", "localhost", 1001, kServerExt),
           MakeLeaf(dir, "ca", "server2", "localhost", 1002, kServerExt),
           MakeLeaf(dir, "ca", "client", "sandgate-test-client", 2001, kClientExt),
           MakeLeaf(dir, "other-ca", "stranger", "sandgate-test-stranger", 3001, kClientExt),
       }) {
    if (!s.ok()) return s;
  }
  auto pair = [&](const std::string& name) {
    return Pair{absl::StrCat(dir, "/", name, ".pem"), absl::StrCat(dir, "/", name, ".key")};
  };
  TestCertificates c;
  c.ca = dir + "/ca.pem";
  c.server = pair("server");
  c.server2 = pair("server2");
  c.client = pair("client");
  c.stranger = pair("stranger");
  return c;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void InstallPair(const TestCertificates::Pair& pair, const std::string& cert,
                 const std::string& key) {
  std::filesystem::copy_file(pair.key, key + ".new");
  std::filesystem::copy_file(pair.cert, cert + ".new");
  std::filesystem::rename(key + ".new", key);
  std::filesystem::rename(cert + ".new", cert);
}

}  // namespace sandgate::testing
