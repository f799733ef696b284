// A test fixture with a fresh directory, removed with everything in it after the test.
#ifndef SANDGATE_TESTS_CLIENT_TEMP_DIR_TEST_BASE_H_
#define SANDGATE_TESTS_CLIENT_TEMP_DIR_TEST_BASE_H_

#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/common/temp_dir.h"

namespace sandgate::cli {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(tmp_.ok()); }
  void Put(const std::string& name, const std::string& content) const {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << content;
  }
  static std::string Slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  testing::ScopedTempDir tmp_{"sandgate_client_test"};
  const std::string& dir_ = tmp_.path();
};

}  // namespace sandgate::cli

#endif  // SANDGATE_TESTS_CLIENT_TEMP_DIR_TEST_BASE_H_
