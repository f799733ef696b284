// The per-RPC policy table (server/rpc_policy.h) covers the services: every RPC of
// sandgate.v1.Sandgate and sandgate.v1.Images has exactly one entry, an entry that forwards names
// the field its request carries the owner in, and the operator rule refuses a tenant naming the
// call.
#include "server/rpc_policy.h"

#include <google/protobuf/descriptor.h>

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sandgate/v1/images.grpc.pb.h"
#include "sandgate/v1/sandgate.grpc.pb.h"

namespace sandgate::server {
namespace {

// Every RPC the daemon serves.
std::vector<const google::protobuf::MethodDescriptor*> Methods() {
  std::vector<const google::protobuf::MethodDescriptor*> methods;
  for (const char* service : {"sandgate.v1.Sandgate", "sandgate.v1.Images"}) {
    const google::protobuf::ServiceDescriptor* s =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
    if (s == nullptr) ADD_FAILURE() << "no service " << service;
    for (int i = 0; s != nullptr && i < s->method_count(); ++i) methods.push_back(s->method(i));
  }
  return methods;
}

TEST(RpcPolicyTest, EveryRpcHasOneEntryAndEveryEntryNamesAnRpcOrARestPage) {
  std::set<std::string> names;
  for (const RpcPolicy& p : kRpcPolicies) {
    EXPECT_TRUE(names.insert(std::string(p.name)).second) << "twice: " << p.name;
  }
  for (const google::protobuf::MethodDescriptor* m : Methods()) {
    EXPECT_EQ(names.erase(m->name()), 1u) << m->full_name() << " has no policy";
  }
  EXPECT_EQ(names, std::set<std::string>{"Metrics"}) << "entries that are neither";
}

TEST(RpcPolicyTest, AForwardedCallsRequestNamesItsOwner) {
  for (const google::protobuf::MethodDescriptor* m : Methods()) {
    const RpcPolicy& p = Policy(m->name());
    if (p.owner == Owner::kAny) continue;
    const char* field = p.owner == Owner::kRun ? "run_id" : "session_id";
    const google::protobuf::Descriptor* request = m->input_type();
    // UploadFile names its session in its header message.
    if (m->client_streaming()) request = request->FindFieldByName("header")->message_type();
    const google::protobuf::FieldDescriptor* f = request->FindFieldByName(field);
    ASSERT_NE(f, nullptr) << m->name() << " forwards by " << field << ", which "
                          << request->full_name() << " lacks";
    EXPECT_EQ(f->type(), google::protobuf::FieldDescriptor::TYPE_STRING);
  }
}

TEST(RpcPolicyTest, TheOperatorRuleRefusesATenantNamingTheCall) {
  core::Caller tenant;
  tenant.tenant = "alice";
  core::Caller ops;
  ops.tenant = "ops";
  ops.is_operator = true;
  for (const RpcPolicy& p : kRpcPolicies) {
    SCOPED_TRACE(std::string(p.name));
    EXPECT_TRUE(Authorize(p, ops).ok());
    absl::Status st = Authorize(p, tenant);
    if (p.auth == Auth::kTenant) {
      EXPECT_TRUE(st.ok()) << st;
      continue;
    }
    EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
    EXPECT_EQ(st.message(), std::string(p.name) + ": the operator role is required");
  }
  EXPECT_EQ(Policy("Drain").auth, Auth::kOperator);
  EXPECT_EQ(Policy("ListResources").auth, Auth::kOperator);
  EXPECT_EQ(Policy("Metrics").auth, Auth::kOperator);
}

}  // namespace
}  // namespace sandgate::server
