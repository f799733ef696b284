#include "server/reflection_v1.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <set>

namespace sandgate::server {
namespace {

namespace rv1 = grpc::reflection::v1;
using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;

// One reflection stream: each request is answered from the generated pool as it is read;
// one write in flight, the next read starts when it is done.
class ReflectionStream final
    : public grpc::ServerBidiReactor<rv1::ServerReflectionRequest, rv1::ServerReflectionResponse> {
 public:
  explicit ReflectionStream(const std::vector<std::string>* services) : services_(services) {
    StartRead(&request_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {  // the client is done (or gone)
      Finish(grpc::Status::OK);
      return;
    }
    Answer();
    StartWrite(&response_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      return;
    }
    StartRead(&request_);
  }
  void OnDone() override { delete this; }

 private:
  void Answer() {
    response_.Clear();
    response_.set_valid_host(request_.host());
    *response_.mutable_original_request() = request_;
    const DescriptorPool* pool = DescriptorPool::generated_pool();
    switch (request_.message_request_case()) {
      case rv1::ServerReflectionRequest::kListServices:
        for (const std::string& name : *services_) {
          response_.mutable_list_services_response()->add_service()->set_name(name);
        }
        return;
      case rv1::ServerReflectionRequest::kFileByFilename:
        return SendFile(pool->FindFileByName(request_.file_by_filename()), "file");
      case rv1::ServerReflectionRequest::kFileContainingSymbol:
        return SendFile(pool->FindFileContainingSymbol(request_.file_containing_symbol()),
                        "symbol");
      case rv1::ServerReflectionRequest::kFileContainingExtension: {
        const auto* type =
            pool->FindMessageTypeByName(request_.file_containing_extension().containing_type());
        const auto* ext = type == nullptr
                              ? nullptr
                              : pool->FindExtensionByNumber(
                                    type, request_.file_containing_extension().extension_number());
        return SendFile(ext == nullptr ? nullptr : ext->file(), "extension");
      }
      case rv1::ServerReflectionRequest::kAllExtensionNumbersOfType: {
        const auto* type = pool->FindMessageTypeByName(request_.all_extension_numbers_of_type());
        if (type == nullptr) return Error(grpc::StatusCode::NOT_FOUND, "type not found");
        std::vector<const google::protobuf::FieldDescriptor*> exts;
        pool->FindAllExtensions(type, &exts);
        auto* out = response_.mutable_all_extension_numbers_response();
        out->set_base_type_name(type->full_name());
        for (const auto* e : exts) out->add_extension_number(e->number());
        return;
      }
      case rv1::ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET:
        return Error(grpc::StatusCode::INVALID_ARGUMENT, "message_request: not set");
    }
  }
  // The file and, once per stream, each file it depends on (the protocol lets a server skip
  // what it sent before).
  void SendFile(const FileDescriptor* file, const char* what) {
    if (file == nullptr)
      return Error(grpc::StatusCode::NOT_FOUND, std::string(what) + " not found");
    std::vector<const FileDescriptor*> todo = {file};
    while (!todo.empty()) {
      const FileDescriptor* f = todo.back();
      todo.pop_back();
      if (!sent_.insert(f->name()).second && f != file) continue;
      google::protobuf::FileDescriptorProto proto;
      f->CopyTo(&proto);
      proto.SerializeToString(
          response_.mutable_file_descriptor_response()->add_file_descriptor_proto());
      for (int i = 0; i < f->dependency_count(); ++i) todo.push_back(f->dependency(i));
    }
  }
  void Error(grpc::StatusCode code, const std::string& message) {
    response_.mutable_error_response()->set_error_code(static_cast<int32_t>(code));
    response_.mutable_error_response()->set_error_message(message);
  }

  const std::vector<std::string>* const services_;
  // Touched only by the one reaction in flight at a time.
  rv1::ServerReflectionRequest request_;
  rv1::ServerReflectionResponse response_;
  std::set<std::string> sent_;
};

}  // namespace

grpc::ServerBidiReactor<rv1::ServerReflectionRequest, rv1::ServerReflectionResponse>*
ReflectionV1::ServerReflectionInfo(grpc::CallbackServerContext* /*ctx*/) {
  return new ReflectionStream(&services_);
}

}  // namespace sandgate::server
