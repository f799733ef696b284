// GvisorTunnel: the daemon's end of the tunnel to a gVisor sandbox's bridge
// (bridge_protocol.h).
//
// It looks like sandgate-init to the session: the session talks to session_end() exactly as
// it talks to a namespaces sandbox's init (kExec with three fds over SOCK_SEQPACKET), and the
// tunnel turns each kExec into a numbered channel over the bridge's one stream connection,
// copying the channel's frames into the fds the session passed and back.
//
//   SANDGATE_ASSIGN_OR_RETURN(auto tunnel, GvisorTunnel::Start(std::move(accepted)));
//   UniqueFd control = tunnel->TakeSessionEnd();   // use as the init's control socket
//   ...
//   shutdown(control.get(), SHUT_RDWR);            // ends the tunnel and the sandbox
//
// Thread safe: one thread of its own copies everything; the destructor ends it (the
// connection is shut down, so the bridge and the sandbox end too) and joins it.
#ifndef SANDGATE_SANDBOX_LOCAL_GVISOR_TUNNEL_H_
#define SANDGATE_SANDBOX_LOCAL_GVISOR_TUNNEL_H_

#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace sandgate::sandbox::local {

class GvisorTunnel {
 public:
  // `bridge` is the accepted stream connection from the sandbox's bridge; `ports`, when
  // valid, the listening socket the bridge connects to with each exposed port's connection
  // (kPortsSocket), which the tunnel hands to the session as the answer to its kConnect.
  static absl::StatusOr<std::unique_ptr<GvisorTunnel>> Start(UniqueFd bridge,
                                                             UniqueFd ports = UniqueFd());
  ~GvisorTunnel();

  // The socket that stands for the init's control socket; call once.
  UniqueFd TakeSessionEnd();

 private:
  GvisorTunnel() = default;
  void Loop();

  UniqueFd bridge_;
  UniqueFd ports_;            // the exposed ports' listener; may be invalid
  UniqueFd tunnel_end_;       // the tunnel's side of the session's socketpair
  UniqueFd session_end_;      // handed out by TakeSessionEnd
  UniqueFd wake_r_, wake_w_;  // the destructor's stop signal
  std::thread thread_;
};

}  // namespace sandgate::sandbox::local

#endif  // SANDGATE_SANDBOX_LOCAL_GVISOR_TUNNEL_H_
