#include "server/rpc_observer.h"

#include <google/protobuf/descriptor.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace sandgate::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

// "/sandgate.v1.Sandgate/RunAnalysis" -> its descriptor in the linked protos, or null.
const google::protobuf::MethodDescriptor* FindMethod(const char* path) {
  if (path == nullptr || path[0] != '/') return nullptr;
  std::string name = absl::StrReplaceAll(std::string(path + 1), {{"/", "."}});
  return google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(name);
}

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(core::Metrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RpcObserver(info, metrics_);
  }

 private:
  core::Metrics* const metrics_;
};

}  // namespace

RpcObserver::RpcObserver(grpc::experimental::ServerRpcInfo* info, core::Metrics* metrics)
    : info_(info),
      metrics_(metrics),
      method_(FindMethod(info->method()) ? info->method() : "unknown") {}

void RpcObserver::Intercept(grpc::experimental::InterceptorBatchMethods* methods) {
  using Type = grpc::experimental::ServerRpcInfo::Type;
  const bool single_request =
      info_->type() == Type::UNARY || info_->type() == Type::SERVER_STREAMING;
  if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
    if (single_request && first_message_) request_missing_ = methods->GetRecvMessage() == nullptr;
    first_message_ = false;
  }
  if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
    grpc::Status status = methods->GetSendStatus();
    if (request_missing_ && status.error_code() == grpc::StatusCode::UNIMPLEMENTED &&
        status.error_message().empty()) {
      const google::protobuf::MethodDescriptor* m = FindMethod(info_->method());
      status = grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("the request is not a valid ", m ? m->input_type()->full_name() : "message",
                       ": it does not parse (a string field that is not valid UTF-8, or bytes "
                       "that are not that message)"));
      methods->ModifySendStatus(status);
    }
    if (metrics_ != nullptr) {
      metrics_->rpcs.Add(
          {{"method", method_},
           {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()))}});
    }
  }
  methods->Proceed();
}

std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
RpcObserver::Factories(core::Metrics* metrics) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> out;
  out.push_back(std::make_unique<Factory>(metrics));
  return out;
}

}  // namespace sandgate::server
