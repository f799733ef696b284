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

// Both faces refuse a NUL in a request's own string fields naming the field (REST in its path
// and query, gRPC in its message), before any lookup could answer NOT_FOUND for it.
TEST(Utf8FieldsTest, ANulInARequestFieldIsInvalidArgumentNamingIt) {
  v1::DownloadFileRequest req;
  req.set_session_id("ses_1");
  req.set_path("notes/a.txt");
  EXPECT_TRUE(CheckNoNul(req).ok());
  req.set_path(std::string("notes/a\0.txt", 12));
  absl::Status st = CheckNoNul(req);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "path: contains a NUL byte");
  v1::ListRunsRequest list;
  list.set_page_token(std::string("a\0b", 3));
  EXPECT_EQ(CheckNoNul(list).message(), "page_token: contains a NUL byte");
  // Bytes fields carry any byte.
  v1::UploadFileRequest data;
  data.set_data(std::string("\0\0", 2));
  EXPECT_TRUE(CheckNoNul(data).ok());
}

}  // namespace
}  // namespace sandgate::server
