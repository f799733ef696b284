// The edge's last guard: nothing the daemon sends carries invalid UTF-8 in a string field or
// a status message, whatever sandbox code put into the text.
#include "server/utf8_fields.h"

#include "common/utf8.h"
#include "gtest/gtest.h"
#include "sandgate/v1/sandgate.pb.h"
#include "server/status.h"

namespace sandgate::server {
namespace {

namespace v1 = ::sandgate::v1;

TEST(Utf8FieldsTest, StringFieldsAreEscapedBytesAreNot) {
  v1::Event e;
  e.set_type("network.decision");
  e.mutable_network()->set_detail("refused caf\xE9");
  v1::Event out;
  out.mutable_command_output()->set_data("raw \xFF bytes");
  v1::Run run;
  run.add_input_names("ok.csv");
  run.add_input_names("bad\xFE.csv");
  run.add_checks()->set_detail("value \xC0\xAF");
  (*run.mutable_labels())["team"] = "a";

  EXPECT_TRUE(EscapeStringFields(&e));
  EXPECT_EQ(e.network().detail(), "refused caf\\xE9");
  EXPECT_FALSE(EscapeStringFields(&out)) << "bytes fields carry any bytes";
  EXPECT_EQ(out.command_output().data(), "raw \xFF bytes");
  EXPECT_TRUE(EscapeStringFields(&run));
  EXPECT_EQ(run.input_names(0), "ok.csv");
  EXPECT_EQ(run.input_names(1), "bad\\xFE.csv");
  EXPECT_EQ(run.checks(0).detail(), "value \\xC0\\xAF");
  EXPECT_EQ(run.labels().at("team"), "a");
  std::string wire;
  ASSERT_TRUE(run.SerializeToString(&wire));
  v1::Run back;
  EXPECT_TRUE(back.ParseFromString(wire)) << "a peer can parse it";
}

TEST(Utf8FieldsTest, StatusMessagesAreEscaped) {
  grpc::Status st = ToGrpc(absl::NotFoundError("caf\xE9.txt: no such file"));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(st.error_message(), "caf\\xE9.txt: no such file");
  EXPECT_TRUE(IsValidUtf8(st.error_message()));
}

}  // namespace
}  // namespace sandgate::server
