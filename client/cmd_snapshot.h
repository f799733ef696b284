// sandgate snapshot ... and the snapshot subcommands of `session` (snapshot, pause, resume):
// a kept session's workspace saved into the daemon's store and restored into a new session,
// on any replica (docs/sessions.md, "Snapshots").
#ifndef SANDGATE_CLIENT_CMD_SNAPSHOT_H_
#define SANDGATE_CLIENT_CMD_SNAPSHOT_H_

#include <string>

#include "client/args.h"
#include "client/command.h"

namespace sandgate::cli {

// `session snapshot ID [--close]`, `session pause ID`: prints the snapshot's id.
// `session resume SNAPSHOT`: prints the new session's id. --json prints the record instead.
int SessionSnapshot(Client& client, const std::string& sub, const Args& args);
// `snapshot list [--session ID]`, `snapshot get ID`, `snapshot rm ID...`.
int CmdSnapshot(Client& client, const std::string& sub, const Args& args);

}  // namespace sandgate::cli

#endif  // SANDGATE_CLIENT_CMD_SNAPSHOT_H_
