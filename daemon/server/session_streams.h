// The streams of a kept session's commands and files: each reactor adapts a core/ unit
// (core/exec_stream.h, core/file_transfer.h) to gRPC. Internal to server/.
#ifndef SANDGATE_SERVER_SESSION_STREAMS_H_
#define SANDGATE_SERVER_SESSION_STREAMS_H_

#include <grpcpp/grpcpp.h>

#include "server/service.h"

namespace sandgate::server {

// Each returns a reactor that deletes itself when gRPC is done with it; `deps` outlives it.
grpc::ServerWriteReactor<v1::ExecResponse>* NewExecStream(const ServiceDeps& deps,
                                                          grpc::CallbackServerContext* ctx,
                                                          const v1::ExecRequest& request);
grpc::ServerWriteReactor<v1::FileChunk>* NewFileDownload(const ServiceDeps& deps,
                                                         grpc::CallbackServerContext* ctx,
                                                         const v1::DownloadFileRequest& request);
grpc::ServerReadReactor<grpc::ByteBuffer>* NewFileUpload(const ServiceDeps& deps,
                                                         grpc::CallbackServerContext* ctx,
                                                         grpc::ByteBuffer* response);

}  // namespace sandgate::server

#endif  // SANDGATE_SERVER_SESSION_STREAMS_H_
