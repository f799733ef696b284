// A test fixture with a fresh directory, removed with everything in it after the test.
#ifndef SANDGATE_TESTS_CLIENT_TEMP_DIR_TEST_BASE_H_
#define SANDGATE_TESTS_CLIENT_TEMP_DIR_TEST_BASE_H_

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace sandgate::cli {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sandgate_client_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  void Put(const std::string& name, const std::string& content) const {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << content;
  }
  static std::string Slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::string dir_;
};

}  // namespace sandgate::cli

#endif  // SANDGATE_TESTS_CLIENT_TEMP_DIR_TEST_BASE_H_
