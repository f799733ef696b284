// The processes of a kept session you talk to, from the CLI (client/cmd_process.cc):
// `session exec` with stdin or --background, `session ps|output|input|kill|shell`.
#ifndef SANDGATE_CLIENT_CMD_PROCESS_H_
#define SANDGATE_CLIENT_CMD_PROCESS_H_

#include <string>

#include "client/command.h"

namespace sandgate::cli {

// The exit status `session exec` passes back for a command that ended as `f` says: its own,
// 124 timed out (as timeout(1)), 128+N killed by signal N.
int ExecStatus(const v1::CommandFinished& f);
// How a command ended, for stderr; empty when it exited on its own.
std::string HowItEnded(const v1::CommandFinished& f);
// Whether stdin carries data to give the command (a pipe, a file or a socket, not a terminal
// or /dev/null): `session exec` then passes it on.
bool StdinIsData();

// `session exec` through a process: stdin passed on (EOF at its end), output followed;
// --background prints the process id at once instead.
int SessionExecProcess(Client& client, const Args& args);
int SessionPs(Client& client, const Args& args);
int SessionOutput(Client& client, const Args& args);
int SessionInput(Client& client, const Args& args);
int SessionKill(Client& client, const Args& args);
// An interactive terminal: raw mode, resized with the local one, keys (Ctrl-C too) go to the
// sandbox; exits with the shell's status.
int SessionShell(Client& client, const Args& args);

}  // namespace sandgate::cli

#endif  // SANDGATE_CLIENT_CMD_PROCESS_H_
