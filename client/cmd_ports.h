// Exposed ports of a kept session, from the CLI (client/cmd_ports.cc):
// `session expose ID PORT [--signed [--ttl 10m]]` prints the URL (and the signed one),
// `session unexpose ID PORT`, `session ports ID`.
#ifndef SANDGATE_CLIENT_CMD_PORTS_H_
#define SANDGATE_CLIENT_CMD_PORTS_H_

#include "client/command.h"

namespace sandgate::cli {

int SessionExpose(Client& client, const Args& args);
int SessionUnexpose(Client& client, const Args& args);
int SessionPorts(Client& client, const Args& args);

}  // namespace sandgate::cli

#endif  // SANDGATE_CLIENT_CMD_PORTS_H_
