// End-to-end tests of the local provider: real bubblewrap sandboxes, run as root.
#include "sandbox/local/bwrap_provider.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sandbox/local/bwrap_session.h"
#include "sandbox/local/init_protocol.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/fake_journal.h"
#include "tests/sandbox/local/sandbox_test_util.h"

namespace sandgate::sandbox {
namespace {

using ::sandgate::testing::FakeJournal;
using ::sandgate::testing::FindDirs;
using ::sandgate::testing::HostProcessesOf;
using ::sandgate::testing::Output;
using ::testing::HasSubstr;
using ::testing::Not;

// Every command line visible inside a sandbox, on one line.
constexpr char kProcessList[] = "cat /proc/[0-9]*/cmdline | tr '\\0' ' '";

// Test providers use uid pools of their own, away from the daemon's default and from other
// test processes that ctest may run at the same time: 32 uids per pool, two pools per process.
uid_t TestUidBase(int pool) { return 200000 + (getpid() % 1000) * 64 + pool * 32; }

BwrapOptions TestOptions(uid_t uid_base, uint32_t pool_size) {
  BwrapOptions opts;
  opts.init_path = SANDGATE_TEST_INIT_PATH;
  opts.uid_base = uid_base;
  opts.uid_pool_size = pool_size;
  opts.cgroup_parent = "sandgate-test";
  return opts;
}

// Every test runs under both isolation levels: the contract is the same.
class BwrapProviderTest : public ::testing::TestWithParam<Isolation> {
 protected:
  void SetUp() override {
    if (GetParam() == Isolation::kGvisor && access("/usr/bin/runsc", X_OK) != 0) {
      GTEST_SKIP() << "runsc is NOT INSTALLED (Debian package runsc; deploy/setup.sh): the "
                      "gVisor half of this test did not run";
    }
    auto p = BwrapProvider::Create(TestOptions(TestUidBase(0), 32), &journal_);
    ASSERT_TRUE(p.ok()) << p.status();
    provider_ = std::move(*p);
  }
  bool gvisor() const { return GetParam() == Isolation::kGvisor; }

  std::unique_ptr<Session> NewSession(const std::string& id, SessionSpec spec = {}) {
    spec.id = id;
    spec.isolation = GetParam();
    auto s = provider_->Create(spec, nullptr);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  static Output Exec(Session* s, std::vector<std::string> argv, ExecRequest req = {},
                     const CancelToken* cancel = nullptr) {
    return ::sandgate::testing::RunCommand(s, std::move(argv), std::move(req), cancel);
  }
  static Output Sh(Session* s, const std::string& script, ExecRequest req = {}) {
    return Exec(s, {"/bin/sh", "-c", script}, std::move(req));
  }

  FakeJournal journal_;
  std::unique_ptr<BwrapProvider> provider_;
};

local::BwrapSession* Local(Session* s) { return dynamic_cast<local::BwrapSession*>(s); }

const ::testing::Environment* const kCleanup = ::testing::AddGlobalTestEnvironment(
    new ::sandgate::testing::CgroupParentCleanup("sandgate-test"));

INSTANTIATE_TEST_SUITE_P(Isolation, BwrapProviderTest,
                         ::testing::Values(Isolation::kNamespaces, Isolation::kGvisor),
                         [](const ::testing::TestParamInfo<Isolation>& info) {
                           return std::string(IsolationName(info.param));
                         });

TEST_P(BwrapProviderTest, EchoOutputCapturedInOrder) {
  auto s = NewSession("echo");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->workdir(), "/work");
  Output r = Exec(s.get(), {"echo", "hello", "sandbox"});
  EXPECT_TRUE(r.result.ok());
  EXPECT_EQ(r.out, "hello sandbox\n");
  r = Sh(s.get(), "for i in 1 2 3 4 5; do echo line$i; done; exit 3");
  EXPECT_EQ(r.out, "line1\nline2\nline3\nline4\nline5\n");
  EXPECT_EQ(r.result.exit_code, 3);
  EXPECT_EQ(r.result.term_signal, 0);
  r = Exec(s.get(), {"pwd"});
  EXPECT_EQ(r.out, "/work\n");
}

TEST_P(BwrapProviderTest, StdoutAndStderrStreamSeparatelyAsProduced) {
  auto s = NewSession("stream");
  ASSERT_NE(s, nullptr);
  ExecRequest req;
  req.argv = {"/bin/sh", "-c", "echo out1; echo err1 >&2; sleep 1; echo out2; echo err2 >&2"};
  const absl::Time start = absl::Now();
  absl::Duration first_chunk = absl::InfiniteDuration();
  std::string out, err;
  auto r = s->Exec(
      req,
      [&](OutputStream st, absl::string_view chunk) {
        if (first_chunk == absl::InfiniteDuration()) first_chunk = absl::Now() - start;
        (st == OutputStream::kStdout ? out : err).append(chunk.data(), chunk.size());
      },
      nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(out, "out1\nout2\n");
  EXPECT_EQ(err, "err1\nerr2\n");
  EXPECT_GE(r->duration, absl::Seconds(1));
  EXPECT_LT(first_chunk, absl::Milliseconds(700)) << "output was not streamed";
}

// Issue 22: the seccomp allowlist keeps ordinary tools working. Each line exercises a tool
// the playbooks and agents use (threads, subprocesses, pipes, sockets, sqlite, ssl, asyncio,
// multiprocessing's semaphores, node's workers and child processes, git, a C compiler, make);
// one that met a refused system call would fail or print something else.
TEST_P(BwrapProviderTest, CommonToolsRunUnderTheFilter) {
  auto s = NewSession("tools");
  ASSERT_NE(s, nullptr);
  ExecRequest slow;
  slow.timeout = absl::Seconds(60);
  Output r = Sh(s.get(), R"sh(set -e
cd /work
printf 'b\na\nc\n' | sort | tr -d '\n'; echo
seq 1 1000 | awk '{s+=$1} END {print s}'
mkdir -p d/e && echo x > d/e/f && tar czf t.tgz d && rm -rf d && tar xzf t.tgz && cat d/e/f
sha256sum d/e/f | cut -c1-8
find . -name f | wc -l
/usr/bin/python3 - <<'PY'
import asyncio, concurrent.futures, json, multiprocessing, os, socket, sqlite3, ssl, subprocess
import tempfile, threading
def square(x):
    return x * x
with multiprocessing.Pool(2) as pool:
    print(sum(pool.map(square, range(10))))
with concurrent.futures.ThreadPoolExecutor(4) as ex:
    print(sum(ex.map(square, range(10))))
print(subprocess.run(["echo", "sub"], capture_output=True, text=True).stdout.strip())
db = sqlite3.connect(":memory:"); db.execute("create table t(x)"); db.execute("insert into t values (7)")
print(db.execute("select x from t").fetchone()[0])
ssl.create_default_context()
a, b = socket.socketpair(); a.send(b"sock"); print(b.recv(4).decode())
async def main():
    await asyncio.sleep(0.01)
    return "async"
print(asyncio.run(main()))
lock = multiprocessing.Lock(); lock.acquire(); lock.release(); print("lock")
print(os.cpu_count() > 0)
PY
node -e 'const {Worker} = require("worker_threads"); const cp = require("child_process");
require("fs").writeFileSync("n.txt", "node"); console.log(require("fs").readFileSync("n.txt", "utf8"));
console.log(cp.execFileSync("echo", ["child"]).toString().trim());
new Worker("require(\"worker_threads\").parentPort.postMessage(6*7)", {eval: true}).on("message", m => console.log(m));'
git init -q repo && cd repo && git config user.email t@t && git config user.name t
echo hi > a && git add a && git commit -qm one && git log --oneline | wc -l && cd ..
printf '#include <stdio.h>\nint main(void){puts("compiled");return 0;}\n' > c.c
printf 'all:\n\tcc -o c c.c\n' > Makefile && make -s && ./c
)sh",
                slow);
  EXPECT_EQ(r.result.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "abc\n500500\nx\n73cb3858\n1\n285\n285\nsub\n7\nsock\nasync\nlock\nTrue\nnode\nchild\n"
            "42\n1\ncompiled\n")
      << r.err;
}

TEST_P(BwrapProviderTest, EnvironmentHoldsNothingOfTheDaemon) {
  setenv("SANDGATE_TEST_CANARY", "daemon-secret-4711", 1);
  SessionSpec spec;
  spec.env = {{"FROM_SESSION", "s"}, {"LANG", "C"}};
  auto s = NewSession("env", spec);
  ASSERT_NE(s, nullptr);
  ExecRequest req;
  req.env = {{"FROM_REQUEST", "r"}, {"FROM_SESSION", "overridden"}};
  Output r = Exec(s.get(), {"env"}, req);
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{
                       "FROM_REQUEST=r", "FROM_SESSION=overridden", "HOME=/work", "LANG=C",
                       "PATH=/usr/local/bin:/usr/bin:/bin", "PYTHONUNBUFFERED=1"}));
  // PID 1's environment: unreadable (not dumpable) or at least free of the canary.
  r = Sh(s.get(), "cat /proc/1/environ; for f in /proc/[0-9]*/environ; do cat $f; done");
  EXPECT_THAT(r.out, Not(HasSubstr("daemon-secret-4711")));
  EXPECT_THAT(r.out, Not(HasSubstr("SANDGATE_TEST_CANARY")));
  // gVisor shows a non-dumpable process's environ as empty instead of refusing to.
  if (!gvisor()) {
    EXPECT_THAT(r.err, HasSubstr("/proc/1/environ"));
  }
}

TEST_P(BwrapProviderTest, OnlyWorkAndTmpAreWritable) {
  auto s = NewSession("rofs");
  ASSERT_NE(s, nullptr);
  for (const char* path : {"/usr/x", "/etc/x", "/x", "/bin/x"}) {
    Output r = Exec(s.get(), {"touch", path});
    EXPECT_NE(r.result.exit_code, 0) << path;
    // gVisor checks the root-owned directory's permissions before the read-only mount.
    EXPECT_THAT(r.err, ::testing::AnyOf(HasSubstr("Read-only file system"),
                                        HasSubstr(gvisor() ? "Permission denied" : "EROFS")))
        << path;
  }
  Output r = Sh(s.get(), "touch /work/ok /tmp/ok && echo fine");
  EXPECT_EQ(r.out, "fine\n");
}

TEST_P(BwrapProviderTest, FilesInWorkBelongToTheSessionUidOnTheHost) {
  auto s = NewSession("owner");
  ASSERT_NE(s, nullptr);
  local::BwrapSession* ls = Local(s.get());
  ASSERT_NE(ls, nullptr);
  EXPECT_GE(ls->host_uid(), 100000u);
  // Under gVisor the commands run as the host uid itself (the gofer creates their files as it).
  const std::string inside_uid = gvisor() ? absl::StrCat(ls->host_uid()) : "1000";
  Output r = Sh(s.get(), "echo hi > made-inside; id -u");
  EXPECT_EQ(r.out, inside_uid + "\n");
  absl::Status w = s->WriteFile("made-by-daemon", "x");
  ASSERT_TRUE(w.ok()) << w;
  for (const char* name : {"made-inside", "made-by-daemon"}) {
    struct stat st;
    ASSERT_EQ(stat(absl::StrCat(ls->host_workspace_path(), "/", name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_uid, ls->host_uid()) << name;
    EXPECT_NE(st.st_uid, 0u) << name;
  }
  // Python's stat: coreutils' statx flags are EINVAL in Debian 12's gVisor.
  r = Exec(s.get(), {"python3", "-c",
                     "import os; s = os.stat('made-by-daemon'); "
                     "print(s.st_uid, oct(s.st_mode)[-3:])"});
  EXPECT_EQ(r.out, inside_uid + " 644\n") << r.err;
}

TEST_P(BwrapProviderTest, ConcurrentSessionsHaveDistinctUidsAndCannotSeeEachOther) {
  auto a = NewSession("iso-a");
  auto b = NewSession("iso-b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(Local(a.get())->host_uid(), Local(b.get())->host_uid());
  // A detached process that outlives its command in session a.
  // (The pause lets setsid run before the command ends and its process group is killed.)
  Sh(a.get(), "setsid sleep 30 >/dev/null 2>&1 < /dev/null & sleep 0.2");
  EXPECT_THAT(Sh(a.get(), kProcessList).out, HasSubstr("sleep 30"));  // the probe can see its own
  Output rb = Sh(b.get(), kProcessList);
  EXPECT_THAT(rb.out, Not(HasSubstr("sleep 30")));
  EXPECT_THAT(rb.out, Not(HasSubstr("sandgate-init 3")));
  // b sees only its init, its shell and cat.
  Output ls = Sh(b.get(), "ls -d /proc/[0-9]* | wc -l");
  EXPECT_LE(atoi(ls.out.c_str()), 4);
}

TEST_P(BwrapProviderTest, ReadFileRefusesPlantedSymlinks) {
  auto s = NewSession("symlink");
  ASSERT_NE(s, nullptr);
  Sh(s.get(), "ln -s /etc/passwd out.txt; ln -s /etc dirlink; ln -s made.txt inside");
  for (const char* path : {"out.txt", "dirlink/passwd", "inside"}) {
    auto r = s->ReadFile(path, 1 << 20);
    ASSERT_FALSE(r.ok()) << path << " returned: " << *r;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(path));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("symbolic link"));
  }
  for (const char* path : {"../etc/passwd", "/etc/passwd"}) {
    EXPECT_EQ(s->ReadFile(path, 1 << 20).status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(s->ReadFile("missing.txt", 10).status().code(), absl::StatusCode::kNotFound);
}

TEST_P(BwrapProviderTest, WriteFileRefusesSymlinkedDirectories) {
  auto s = NewSession("wsymlink");
  ASSERT_NE(s, nullptr);
  Sh(s.get(), "ln -s /etc a; ln -s /proc/self p");
  EXPECT_FALSE(s->WriteFile("a/sandgate-escape", "x").ok());
  EXPECT_FALSE(s->WriteFile("p/sandgate-escape", "x").ok());
  EXPECT_NE(access("/etc/sandgate-escape", F_OK), 0);
  ASSERT_TRUE(s->WriteFile("d1/d2/f.txt", "nested").ok());
  ASSERT_TRUE(s->WriteFile("d1/d2/f.txt", "replaced").ok());
  EXPECT_EQ(Exec(s.get(), {"cat", "d1/d2/f.txt"}).out, "replaced");
  auto list = s->ListFiles("");
  ASSERT_TRUE(list.ok()) << list.status();
  std::map<std::string, FileType> types;
  for (const FileEntry& e : list->entries) types[e.path] = e.type;
  EXPECT_EQ(types["a"], FileType::kSymlink);
  EXPECT_EQ(types["d1"], FileType::kDirectory);
  EXPECT_EQ(types["d1/d2/f.txt"], FileType::kRegular);
  EXPECT_EQ(types.count("a/passwd"), 0u);
}

TEST_P(BwrapProviderTest, FifoIsRefusedImmediately) {
  auto s = NewSession("fifo");
  ASSERT_NE(s, nullptr);
  Exec(s.get(), {"mkfifo", "f"});
  const absl::Time start = absl::Now();
  auto r = s->ReadFile("f", 1024);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  ASSERT_FALSE(r.ok());
  if (gvisor()) {
    // gVisor keeps a named pipe inside its own kernel: nothing reaches the host's /work.
    EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
    return;
  }
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "f: not a regular file");
}

TEST_P(BwrapProviderTest, ReadFileOverTheCapIsResourceExhausted) {
  auto s = NewSession("cap");
  ASSERT_NE(s, nullptr);
  Sh(s.get(), "head -c 5000 /dev/zero > big; truncate -s 10G sparse");
  EXPECT_EQ(s->ReadFile("big", 4999).status().code(), absl::StatusCode::kResourceExhausted);
  const absl::Time start = absl::Now();
  EXPECT_EQ(s->ReadFile("sparse", 1 << 20).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  auto r = s->ReadFile("big", 5000);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->size(), 5000u);
}

TEST_P(BwrapProviderTest, HardLinkedFilesAreRefused) {
  auto s = NewSession("hardlink");
  ASSERT_NE(s, nullptr);
  Sh(s.get(), "echo x > a; ln a b");
  auto r = s->ReadFile("b", 100);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
}

TEST_P(BwrapProviderTest, NoNetwork) {
  // A listener on the host's loopback that the sandbox must not reach.
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  ASSERT_GE(lfd, 0);
  struct sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(lfd, 4), 0);
  socklen_t len = sizeof(addr);
  getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);

  auto s = NewSession("nonet");
  ASSERT_NE(s, nullptr);
  Output r = Sh(s.get(), "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
  EXPECT_EQ(r.out, "lo\n");
  r = Exec(s.get(), {"python3", "-c",
                     absl::StrCat("import socket; socket.create_connection(('127.0.0.1', ", port,
                                  "), timeout=2)")});
  EXPECT_NE(r.result.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("Connection refused"));
  r = Exec(s.get(), {"bash", "-c", absl::StrCat("echo x > /dev/tcp/127.0.0.1/", port)});
  EXPECT_NE(r.result.exit_code, 0);
  struct pollfd p = {lfd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0) << "the host listener saw a connection";
  close(lfd);
}

TEST_P(BwrapProviderTest, TimeoutKillsTheCommandQuickly) {
  auto s = NewSession("timeout");
  ASSERT_NE(s, nullptr);
  ExecRequest req;
  req.timeout = absl::Milliseconds(300);
  Output r = Exec(s.get(), {"sleep", "100"}, req);
  EXPECT_TRUE(r.result.timed_out);
  EXPECT_FALSE(r.result.ok());
  EXPECT_EQ(r.result.term_signal, SIGKILL);
  EXPECT_LT(r.result.duration, absl::Seconds(2));
  // The session is still usable.
  EXPECT_EQ(Exec(s.get(), {"echo", "alive"}).out, "alive\n");
}

TEST_P(BwrapProviderTest, CancelTokenStopsARunningCommand) {
  auto s = NewSession("cancel");
  ASSERT_NE(s, nullptr);
  CancelToken token;
  ExecRequest req;
  req.argv = {"/bin/sh", "-c", "echo started; exec sleep 100"};
  // Cancelled once the command runs (its first output), not after a guessed delay.
  auto r = s->Exec(
      req, [&](OutputStream, absl::string_view) { token.Cancel("test"); }, &token);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->cancelled);
  EXPECT_FALSE(r->timed_out);
  EXPECT_LT(r->duration, absl::Seconds(2));
}

TEST_P(BwrapProviderTest, OutputBeyondTheCapIsDroppedAndFlagged) {
  auto s = NewSession("outcap");
  ASSERT_NE(s, nullptr);
  ExecRequest req;
  req.output_cap_bytes = 1 << 20;
  uint64_t out_bytes = 0, err_bytes = 0;
  req.argv = {"/bin/sh", "-c", "yes | head -c 50M; echo done >&2"};
  auto r = s->Exec(
      req,
      [&](OutputStream st, absl::string_view chunk) {
        (st == OutputStream::kStdout ? out_bytes : err_bytes) += chunk.size();
      },
      nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_TRUE(r->stdout_truncated);
  EXPECT_FALSE(r->stderr_truncated);
  EXPECT_EQ(out_bytes, 1u << 20);
  EXPECT_EQ(err_bytes, 5u);
}

TEST_P(BwrapProviderTest, BackgroundChildrenDoNotHoldExecOpenAndDieWithTheCommand) {
  auto s = NewSession("background");
  ASSERT_NE(s, nullptr);
  // The background sleep inherits stdout; the command is over when the shell exits.
  Output r = Sh(s.get(), "sleep 30 & echo started");
  EXPECT_EQ(r.out, "started\n");
  EXPECT_TRUE(r.result.ok());
  EXPECT_LT(r.result.duration, absl::Seconds(2));
  // The init killed the command's process group when the daemon stopped waiting; the kernel
  // reaps it soon after. Each look is a command, which paces the loop.
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  do {
    r = Sh(s.get(), kProcessList);
  } while (absl::StrContains(r.out, "sleep 30") && absl::Now() < give_up);
  EXPECT_THAT(r.out, Not(HasSubstr("sleep 30")));
}

TEST_P(BwrapProviderTest, CloseLeavesNoProcessCgroupOrRecord) {
  auto s = NewSession("closing");
  ASSERT_NE(s, nullptr);
  const uid_t uid = Local(s.get())->host_uid();
  Sh(s.get(), "setsid sleep 100 >/dev/null 2>&1 </dev/null & sleep 0.2");
  std::vector<std::string> dirs;
  FindDirs("/sys/fs/cgroup", "sandgate-closing", 0, &dirs);
  EXPECT_FALSE(dirs.empty()) << "no session cgroup was created";
  // Under gVisor no host process runs as the uid (runsc, the gofer and the Sentry run as
  // root and nobody): the session's cgroups hold them.
  if (gvisor()) {
    EXPECT_GE(::sandgate::testing::ProcessesInCgroups(dirs).size(), 3u);
  } else {
    EXPECT_GE(HostProcessesOf(uid).size(), 3u);  // bwrap, init, sleep
  }
  const std::string gvisor_dir = "/run/sandgate-sandboxes/gvisor/sandgate-closing";
  EXPECT_EQ(access(gvisor_dir.c_str(), F_OK) == 0, gvisor());
  EXPECT_TRUE(journal_.Has("local-session:closing"));

  ASSERT_TRUE(s->Close().ok());
  ASSERT_TRUE(s->Close().ok());  // idempotent
  EXPECT_TRUE(HostProcessesOf(uid).empty());
  EXPECT_TRUE(::sandgate::testing::ProcessesInCgroups(dirs).empty());
  EXPECT_NE(access(gvisor_dir.c_str(), F_OK), 0) << "runsc state and bundle left behind";
  dirs.clear();
  FindDirs("/sys/fs/cgroup", "sandgate-closing", 0, &dirs);
  EXPECT_TRUE(dirs.empty()) << dirs[0];
  EXPECT_FALSE(journal_.Has("local-session:closing"));
  ExecRequest req;
  req.argv = {"true"};
  EXPECT_EQ(s->Exec(req, nullptr, nullptr).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(s->ReadFile("x", 1).ok());
}

// Issue 20 item 6: a sandbox killed from outside is known dead at once (OnEnded, from the
// provider's exit watcher), Health says why, and Exec is FAILED_PRECONDITION saying so, not a
// broken pipe.
TEST_P(BwrapProviderTest, ASandboxKilledFromOutsideSaysItDiedAndWhy) {
  auto s = NewSession("dies");
  ASSERT_NE(s, nullptr);
  absl::Notification ended;
  s->OnEnded([&ended] { ended.Notify(); });
  EXPECT_FALSE(s->Health().expired);
  EXPECT_FALSE(ended.HasBeenNotified());
  ASSERT_EQ(kill(Local(s.get())->init_pid(), SIGKILL), 0);
  ASSERT_TRUE(ended.WaitForNotificationWithTimeout(absl::Seconds(30)));
  const SessionHealth h = s->Health();
  EXPECT_TRUE(h.expired);
  // Under gVisor init_pid() is runsc's: the runtime process, killed, is the death.
  EXPECT_EQ(h.reason, gvisor()
                          ? "its sandbox died: runsc (the sandbox's parent process) was "
                            "killed by signal 9 (SIGKILL)"
                          : "its sandbox died: its init (PID 1) was killed by signal 9 (SIGKILL)");
  ExecRequest req;
  req.argv = {"true"};
  absl::StatusOr<ExecResult> r = s->Exec(req, nullptr, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_EQ(r.status().message(), "session dies: " + h.reason);
  // Closing a dead sandbox cleans up as ever, and calls no callback.
  EXPECT_TRUE(s->Close().ok());
  EXPECT_FALSE(s->Health().expired);
  EXPECT_FALSE(journal_.Has("local-session:dies"));
}

// A sandbox closed by its owner is no death: no callback.
TEST_P(BwrapProviderTest, CloseIsNoDeath) {
  auto s = NewSession("no-death");
  ASSERT_NE(s, nullptr);
  bool called = false;
  s->OnEnded([&called] { called = true; });
  EXPECT_TRUE(s->Close().ok());
  EXPECT_FALSE(called);
}

TEST_P(BwrapProviderTest, CloseDuringExecEndsItCancelled) {
  auto s = NewSession("close-exec");
  ASSERT_NE(s, nullptr);
  // Closed from another thread once the command runs (its first output).
  absl::Notification running;
  std::thread closer([&] {
    running.WaitForNotification();
    EXPECT_TRUE(s->Close().ok());
  });
  ExecRequest req;
  req.argv = {"/bin/sh", "-c", "echo started; exec sleep 100"};
  auto r = s->Exec(
      req,
      [&](OutputStream, absl::string_view) {
        if (!running.HasBeenNotified()) running.Notify();
      },
      nullptr);
  closer.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->cancelled);
  EXPECT_LT(r->duration, absl::Seconds(3));
}

TEST_P(BwrapProviderTest, SandboxProcessesAreInTheSessionCgroups) {
  SessionSpec spec;
  spec.max_processes = 32;
  auto s = NewSession("placed", spec);
  ASSERT_NE(s, nullptr);
  std::ifstream in(absl::StrCat("/proc/", Local(s.get())->init_pid(), "/cgroup"));
  std::string line;
  int placed = 0;
  while (std::getline(in, line)) {
    if (absl::EndsWith(line, "/sandgate-placed")) ++placed;
  }
  for (const std::string& w : s->Warnings()) {
    if (absl::StartsWith(w, "memory limit not enforced") ||
        absl::StartsWith(w, "process limit not enforced")) {
      GTEST_SKIP() << "cgroups unavailable here, and Warnings() says so: " << w;
    }
  }
  // Every hierarchy the provider uses on this host: v1 memory and pids, and v2 (or, on a
  // legacy host, the freezer).
  auto host = local::DetectCgroups("sandgate-test");
  ASSERT_TRUE(host.ok());
  int expected = 0;
  for (const std::string* dir : {&host->memory_v1, &host->pids_v1, &host->unified}) {
    if (!dir->empty()) ++expected;
  }
  if (host->unified.empty() && !host->freezer_v1.empty()) ++expected;
  EXPECT_EQ(placed, expected) << "the init is not in every session cgroup";
  // A fork bomb stops at pids.max (32 here, init and python included) and the session stays
  // usable.
  Output r = Exec(s.get(), {"python3", "-c", R"(
import os, signal, time
pids = []
for _ in range(64):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(5)
        os._exit(0)
    pids.append(pid)
print(len(pids))
for pid in pids:
    os.kill(pid, signal.SIGKILL)
)"});
  // Under gVisor the limit is the commands' RLIMIT_NPROC (the init runs as another uid).
  EXPECT_LE(atoi(r.out.c_str()), gvisor() ? 32 : 30) << r.out << r.err;
  EXPECT_GE(atoi(r.out.c_str()), 20) << r.out << r.err;
  EXPECT_EQ(Exec(s.get(), {"echo", "usable"}).out, "usable\n");
}

TEST_P(BwrapProviderTest, MemoryLimitIsEnforcedOrReported) {
  SessionSpec spec;
  spec.memory_bytes = 64 << 20;
  spec.workspace_bytes = 8 << 20;
  auto s = NewSession("oom", spec);
  ASSERT_NE(s, nullptr);
  bool unenforced = false;
  for (const std::string& w : s->Warnings()) {
    if (absl::StartsWith(w, "memory limit not enforced")) unenforced = true;
  }
  if (gvisor() && !unenforced) {
    // The Sentry holds the sandbox's memory, so the host's OOM killer ends the whole
    // sandbox, not one command: the session dies, saying the limit was the cause.
    ExecRequest req;
    req.argv = {"python3", "-c", "b = b'x' * (256 << 20); print(len(b))"};
    absl::StatusOr<ExecResult> r = s->Exec(req, nullptr, nullptr);
    if (r.ok()) {
      EXPECT_EQ(r->term_signal, SIGKILL);
    } else {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
    }
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (!s->Health().expired && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(20));
    EXPECT_THAT(s->Health().reason, HasSubstr("memory limit (67108864 bytes) was reached"));
    return;
  }
  Output r = Exec(s.get(), {"python3", "-c", "b = b'x' * (256 << 20); print(len(b))"});
  if (unenforced) {
    GTEST_SKIP() << "memory cgroup unavailable here; Warnings() says so";
  }
  EXPECT_TRUE(r.result.oom_killed)
      << "exit " << r.result.exit_code << " signal " << r.result.term_signal << " " << r.err;
  EXPECT_EQ(r.result.term_signal, SIGKILL);
  EXPECT_EQ(r.out, "");
  // The session survives its command's OOM.
  EXPECT_EQ(Exec(s.get(), {"echo", "after"}).out, "after\n");
}

// Issue 20 item 7: a sandbox's processes have the provider's open-file limit, soft and hard,
// not the daemon's (20000 here), and cannot raise it: one session cannot take the host's
// file table.
TEST_P(BwrapProviderTest, OpenFilesAreCappedByTheProviderNotTheDaemon) {
  constexpr char kOpenAll[] = R"(
import errno, os, resource
fds = []
try:
    while True:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    print(errno.errorcode[e.errno])
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1 << 16, 1 << 16))
    print("raised")
except ValueError:
    print("refused")
)";
  auto s = NewSession("nofile");
  ASSERT_NE(s, nullptr);
  Output r = Sh(s.get(), "ulimit -Sn; ulimit -Hn; grep 'Max open files' /proc/self/limits");
  // gVisor's /proc/self/limits has no such line.
  EXPECT_THAT(r.out,
              ::testing::StartsWith(gvisor() ? "1024\n1024\n"
                                             : "1024\n1024\nMax open files            1024  "))
      << r.out;
  r = Exec(s.get(), {"python3", "-c", kOpenAll});
  EXPECT_EQ(r.out, "EMFILE\nrefused\n") << r.err;

  BwrapOptions opts = TestOptions(TestUidBase(1), 1);
  opts.max_open_files = 256;
  auto other = BwrapProvider::Create(opts, &journal_);
  ASSERT_TRUE(other.ok()) << other.status();
  SessionSpec spec;
  spec.id = "nofile-256";
  auto small = (*other)->Create(spec, nullptr);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(Sh(small->get(), "ulimit -Sn; ulimit -Hn").out, "256\n256\n");
}

TEST_P(BwrapProviderTest, WorkspaceSizeAndInodesAreCapped) {
  SessionSpec spec;
  spec.workspace_bytes = 4 << 20;
  spec.workspace_inodes = 64;
  auto s = NewSession("wscaps", spec);
  ASSERT_NE(s, nullptr);
  for (const std::string& w : s->Warnings()) {
    EXPECT_THAT(w, Not(HasSubstr("inode limit"))) << w;
  }
  Output r = Sh(s.get(), "head -c 8M /dev/zero > big; echo $?");
  EXPECT_THAT(r.err, HasSubstr("No space left on device"));
  r = Sh(s.get(),
         "rm -f big; for i in $(seq 1 100); do touch f$i 2>/dev/null || break; done; "
         "ls | wc -l; touch /tmp/t1 && echo tmp-ok");
  EXPECT_LT(atoi(r.out.c_str()), 64);
  EXPECT_GT(atoi(r.out.c_str()), 50);
  EXPECT_THAT(r.out, HasSubstr("tmp-ok"));
  // The daemon's uploads hit the same caps as a clean error.
  EXPECT_EQ(s->WriteFile("huge", std::string(5 << 20, 'x')).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_P(BwrapProviderTest, WarningsNameWhatIsNotEnforced) {
  SessionSpec spec;
  spec.memory_bytes = 64 << 20;
  spec.workspace_bytes = 64 << 20;
  auto s = NewSession("warnings", spec);
  ASSERT_NE(s, nullptr);
  bool tmpfs_vs_memory = false;
  for (const std::string& line : s->Warnings()) {
    if (absl::StrContains(line, "can fill the memory limit")) tmpfs_vs_memory = true;
  }
  EXPECT_TRUE(tmpfs_vs_memory);
}

TEST_P(BwrapProviderTest, SweepRemovesWhatALostSessionLeft) {
  // As the daemon should be: a subreaper, so what the sweep kills is reaped here at once.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  absl::Cleanup no_subreaper = [] { prctl(PR_SET_CHILD_SUBREAPER, 0); };
  FakeJournal journal;
  const BwrapOptions opts = TestOptions(TestUidBase(1), 4);
  auto first = BwrapProvider::Create(opts, &journal);
  ASSERT_TRUE(first.ok()) << first.status();
  SessionSpec spec;
  spec.id = "lost";
  auto s = (*first)->Create(spec, nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  const uid_t uid = Local(s->get())->host_uid();
  Sh(s->get(), "setsid sleep 100 >/dev/null 2>&1 </dev/null & sleep 0.2");
  // The daemon "crashes": the session is never closed and the provider goes away.
  s->release();
  first->reset();
  ASSERT_FALSE(HostProcessesOf(uid).empty());
  auto entries = journal.List();
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);

  auto second = BwrapProvider::Create(opts, &journal);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE((*second)->Sweep((*entries)[0]).ok());
  EXPECT_TRUE(HostProcessesOf(uid).empty());
  // Reaps the leaked bwrap, whose sandbox the sweep killed, so it exits: waitpid blocks until
  // it has, then fails with ECHILD.
  while (waitpid(-1, nullptr, 0) > 0) {
  }
  std::vector<std::string> dirs;
  FindDirs("/sys/fs/cgroup", "sandgate-lost", 0, &dirs);
  EXPECT_TRUE(dirs.empty());
  EXPECT_TRUE(journal.List()->empty());
  // A second sweep of the same entry finds nothing and is fine.
  EXPECT_TRUE((*second)->Sweep((*entries)[0]).ok());
}

TEST_P(BwrapProviderTest, SweepRefusesUidsOutsideThePool) {
  JournalEntry e;
  e.id = "local-session:evil";
  e.provider = "local";
  e.kind = "session";
  e.details = {{"uid", 0}, {"cgroups", {"/sys/fs/cgroup/memory"}}};
  EXPECT_EQ(provider_->Sweep(e).code(), absl::StatusCode::kInvalidArgument);
  e.details = {{"uid", TestUidBase(0) + 40}, {"cgroups", {"/sys/fs/cgroup/memory"}}};
  EXPECT_EQ(provider_->Sweep(e).code(), absl::StatusCode::kInvalidArgument);
  // A pool uid, but a cgroup that is not a session's: left alone.
  const std::string foreign = absl::StrCat("/sys/fs/cgroup/pids/not-sandgate-", getpid());
  ASSERT_EQ(mkdir(foreign.c_str(), 0755), 0);
  e.details = {{"uid", TestUidBase(0) + 31}, {"cgroups", {foreign}}};
  EXPECT_EQ(provider_->Sweep(e).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(access(foreign.c_str(), F_OK), 0);
  rmdir(foreign.c_str());
}

TEST_P(BwrapProviderTest, RestrictedNetworkRejectsABadAllowlistBeforeJournaling) {
  SessionSpec spec;
  spec.id = "net";
  spec.network.mode = NetworkMode::kRestricted;
  spec.network.allowed_domains = {"ok.example", "bad host\r\nX: y"};
  auto s = provider_->Create(spec, nullptr);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("allowed_domains"));
  EXPECT_TRUE(journal_.List()->empty());
}

// The proxy answers inside the sandbox without any upstream: a host outside the allowlist is
// refused by the daemon itself. (Allowed traffic is tested in tests/security with a test
// network namespace.)
TEST_P(BwrapProviderTest, RestrictedNetworkSetsProxyVariablesAndDeniesUnlistedHosts) {
  SessionSpec spec;
  spec.network.mode = NetworkMode::kRestricted;
  spec.network.allowed_domains = {"*.allowed.example"};
  std::vector<NetworkDecision> decisions;
  absl::Mutex mu;
  spec.on_network_decision = [&](const NetworkDecision& d) {
    absl::MutexLock l(&mu);
    decisions.push_back(d);
  };
  auto s = NewSession("proxyenv", spec);
  ASSERT_NE(s, nullptr);
  Output r = Sh(s.get(), "env | grep -i _proxy= | LC_ALL=C sort");
  EXPECT_EQ(r.out,
            "ALL_PROXY=http://127.0.0.1:3128\nHTTPS_PROXY=http://127.0.0.1:3128\n"
            "HTTP_PROXY=http://127.0.0.1:3128\nNO_PROXY=localhost,127.0.0.1\n"
            "all_proxy=http://127.0.0.1:3128\nhttp_proxy=http://127.0.0.1:3128\n"
            "https_proxy=http://127.0.0.1:3128\nno_proxy=localhost,127.0.0.1\n");
  r = Exec(s.get(), {"curl", "-sS", "-o", "/dev/null", "-D", "-", "http://evil.example/"});
  EXPECT_THAT(r.out, HasSubstr("403 Forbidden"));
  EXPECT_THAT(r.out, HasSubstr("X-Proxy-Error: blocked-by-allowlist"));
  absl::MutexLock l(&mu);
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_EQ(decisions[0].session_id, "proxyenv");
  EXPECT_EQ(decisions[0].verdict, NetworkDecision::Verdict::kDenied);
  EXPECT_EQ(decisions[0].host, "evil.example");
  EXPECT_EQ(decisions[0].port, 80);
  EXPECT_EQ(decisions[0].reason, "blocked-by-allowlist");
}

TEST_P(BwrapProviderTest, InvalidRequestsAreRejected) {
  SessionSpec spec;
  spec.id = "Bad_Id";
  EXPECT_EQ(provider_->Create(spec, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  auto s = NewSession("invalid");
  ASSERT_NE(s, nullptr);
  spec.id = "invalid";  // a live session has it
  EXPECT_EQ(provider_->Create(spec, nullptr).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Exec(s.get(), {"echo", "unharmed"}).out, "unharmed\n");
  EXPECT_EQ(s->Exec({}, nullptr, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  ExecRequest req;
  req.argv = {"true"};
  req.env = {{"A=B", "c"}};
  EXPECT_EQ(s->Exec(req, nullptr, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  req.env.clear();
  req.cwd = "../..";
  EXPECT_EQ(s->Exec(req, nullptr, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  Output r = Exec(s.get(), {"no-such-command-xyz"});
  EXPECT_EQ(r.result.exit_code, 127);
  EXPECT_THAT(r.err, HasSubstr("no-such-command-xyz"));
}

TEST_P(BwrapProviderTest, SandboxHardening) {
  auto s = NewSession("hardening");
  ASSERT_NE(s, nullptr);
  if (gvisor()) {
    // gVisor's own kernel answers every call: its version, not the host's; what it allows
    // (namespaces, io_uring, …) never reaches the host kernel. The rest matches namespaces.
    EXPECT_EQ(Exec(s.get(), {"uname", "-r"}).out, "4.4.0\n");
    Exec(s.get(), {"kill", "-9", "1"});
    Exec(s.get(), {"kill", "-9", "2"});  // the init: root there, out of the commands' reach
    EXPECT_EQ(Exec(s.get(), {"echo", "still"}).out, "still\n");
    Output r = Sh(s.get(), "grep -E '^CapEff:' /proc/self/status; hostname; id -u");
    EXPECT_EQ(r.out, absl::StrCat("CapEff:\t0000000000000000\nsandgate\n",
                                  Local(s.get())->host_uid(), "\n"));
    r = Exec(s.get(), {"ls", "/sys/fs/cgroup", "/root", "/etc/shadow", "/.sandgate/sock"});
    EXPECT_NE(r.result.exit_code, 0);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(Exec(s.get(), {"grep", "-c", "", "/etc/passwd"}).out, "3\n");
    return;
  }
  // Nested namespaces, mount and ptrace of the init are refused.
  EXPECT_NE(Exec(s.get(), {"unshare", "-Ur", "true"}).result.exit_code, 0);
  EXPECT_NE(Exec(s.get(), {"unshare", "-n", "true"}).result.exit_code, 0);
  // kill -9 1 does nothing; the next command still runs.
  Exec(s.get(), {"kill", "-9", "1"});
  EXPECT_EQ(Exec(s.get(), {"echo", "still"}).out, "still\n");
  Output r = Sh(s.get(), "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; hostname");
  EXPECT_THAT(r.out, HasSubstr("CapEff:\t0000000000000000"));
  EXPECT_THAT(r.out, HasSubstr("NoNewPrivs:\t1"));
  EXPECT_THAT(r.out, HasSubstr("Seccomp:\t2"));
  EXPECT_THAT(r.out, HasSubstr("sandgate\n"));
  r = Exec(s.get(), {"ls", "/sys/fs/cgroup", "/root", "/etc/shadow"});
  EXPECT_NE(r.result.exit_code, 0);
  EXPECT_EQ(r.out, "");
  // The seccomp filter: keyrings, io_uring, bpf and raw packet sockets are refused.
  r = Exec(s.get(), {"python3", "-c", R"(
import ctypes, errno, socket
libc = ctypes.CDLL(None, use_errno=True)
def err(nr, *args):
    libc.syscall(nr, *args)
    return errno.errorcode[ctypes.get_errno()]
try:
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    packet = "allowed"
except OSError as e:
    packet = errno.errorcode[e.errno]
print(err(250, 0), err(425, 1, 0), err(321, 0, 0, 0), packet)
)"});
  EXPECT_EQ(r.out, "EPERM ENOSYS EPERM EAFNOSUPPORT\n") << r.err;
  // Only the curated /etc is visible.
  EXPECT_EQ(Exec(s.get(), {"grep", "-c", "", "/etc/passwd"}).out, "3\n");
}

// Issue 9, item 1: a clone in a 0700 home. bwrap runs as the session's uid, which cannot
// traverse such a directory, so nothing of it may be bound into the sandbox: the daemon opens
// the init and bwrap copies it in from the descriptor.
TEST(BwrapProviderPathsTest, InitInADirectoryTheSandboxUidCannotTraverse) {
  char tmpl[] = "/tmp/sandgate-0700-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string init = dir + "/bin/sandgate-init";
  absl::Cleanup rm = [&] {
    unlink(init.c_str());
    rmdir((dir + "/bin").c_str());
    rmdir(dir.c_str());
  };
  ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
  ASSERT_EQ(mkdir((dir + "/bin").c_str(), 0755), 0);
  {
    std::ifstream in(SANDGATE_TEST_INIT_PATH, std::ios::binary);
    std::ofstream out(init, std::ios::binary);
    out << in.rdbuf();
  }
  ASSERT_EQ(chmod(init.c_str(), 0755), 0);

  FakeJournal journal;
  BwrapOptions opts = TestOptions(TestUidBase(1) + 8, 2);
  opts.init_path = init;
  auto provider = BwrapProvider::Create(opts, &journal);
  ASSERT_TRUE(provider.ok()) << provider.status();
  SessionSpec spec;
  spec.id = "home0700";
  auto s = (*provider)->Create(spec, nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  // The init is a copy in the read-only root; the host directory is not there at all.
  Output r = ::sandgate::testing::RunCommand(
      s->get(), {"/bin/sh", "-c", absl::StrCat("echo ran; ls -l /.sandgate/init; ls ", dir)});
  EXPECT_THAT(r.out, HasSubstr("ran\n-r-xr-xr-x"));
  EXPECT_THAT(r.err, HasSubstr("No such file or directory"));
  EXPECT_TRUE((*s)->Close().ok());
}

// A hand-made image root: the host's dash and cat with the libraries they load, in a merged
// /usr with the usual top-level links, and whatever /etc the test then adds. Empty on
// failure (the test's ASSERTs say why).
std::string MakeImageRoot(const ::sandgate::testing::ScopedTempDir& tmp) {
  const std::string root = tmp.path() + "/root";
  std::vector<std::string> files = {"/usr/bin/dash", "/usr/bin/cat"};
  FILE* ldd = popen("ldd /usr/bin/dash /usr/bin/cat", "r");
  if (ldd == nullptr) return "";
  char line[512];
  while (fgets(line, sizeof(line), ldd) != nullptr) {
    // "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)" or "\t/lib64/ld-linux… (0x…)"
    for (absl::string_view word : absl::StrSplit(line, absl::ByAnyChar(" \t\n"))) {
      if (absl::StartsWith(word, "/") && !absl::EndsWith(word, ":")) files.emplace_back(word);
    }
  }
  pclose(ldd);
  std::error_code error;
  for (const std::string& file : files) {
    // Merged /usr: /lib/x/y lives at /usr/lib/x/y, reached through the /lib link.
    const std::string to = root + (absl::StartsWith(file, "/usr/") ? "" : "/usr") + file;
    std::filesystem::create_directories(std::filesystem::path(to).parent_path(), error);
    std::filesystem::copy_file(file, to, std::filesystem::copy_options::overwrite_existing, error);
    if (error) return "";
  }
  for (const char* top : {"bin", "lib", "lib64"}) {
    std::filesystem::create_directory_symlink(absl::StrCat("usr/", top), root + "/" + top, error);
  }
  std::filesystem::create_directory_symlink("dash", root + "/usr/bin/sh", error);
  std::filesystem::create_directories(root + "/etc", error);
  chmod(tmp.path().c_str(), 0755);  // as an image's directory: the sandbox uid passes
  return error ? "" : root;
}

// Follow-up of issue 22: an absolute link in an image's /etc names a path of the image, as
// it would on a machine booted from it; neither bubblewrap nor gVisor's gofer may resolve it
// against the host's root (the host's /usr/share/zoneinfo/Etc/UTC has other bytes).
TEST_P(BwrapProviderTest, AnAbsoluteLinkInAnImagesEtcResolvesInsideTheImage) {
  ::sandgate::testing::ScopedTempDir tmp("sandgate-image-links");
  ASSERT_TRUE(tmp.ok());
  const std::string root = MakeImageRoot(tmp);
  ASSERT_FALSE(root.empty());
  std::filesystem::create_directories(root + "/usr/share/zoneinfo/Etc");
  std::ofstream(root + "/usr/share/zoneinfo/Etc/UTC") << "the image's zone\n";
  ASSERT_EQ(symlink("/usr/share/zoneinfo/Etc/UTC", (root + "/etc/localtime").c_str()), 0);
  // A relative link, as Debian's /etc/os-release is: resolves inside the image too.
  std::ofstream(root + "/usr/share/release") << "the image's release\n";
  ASSERT_EQ(symlink("../usr/share/release", (root + "/etc/os-release").c_str()), 0);
  SessionSpec spec;
  spec.root_dir = root;
  auto s = NewSession("imagelinks", spec);
  ASSERT_NE(s, nullptr);
  Output r = Exec(s.get(), {"/usr/bin/cat", "/etc/localtime", "/etc/os-release"});
  EXPECT_EQ(r.out, "the image's zone\nthe image's release\n") << r.err;
  EXPECT_EQ(r.result.exit_code, 0);
  EXPECT_TRUE(s->Close().ok());
}

// The hostile side: an image whose /etc entries (or /etc itself) are links out of the image,
// absolute or through a chain of "..", to a host file or directory the sandbox uid could read.
// Nothing of the host may appear in the sandbox: the daemon binds only what the image holds.
TEST_P(BwrapProviderTest, LinksInAnImageNeverBindAHostPath) {
  ::sandgate::testing::ScopedTempDir tmp("sandgate-image-hostile");
  ASSERT_TRUE(tmp.ok());
  const std::string root = MakeImageRoot(tmp);
  ASSERT_FALSE(root.empty());
  // A host secret the session's uid could read if it were bound in.
  ::sandgate::testing::ScopedTempDir host("sandgate-host-secret");
  ASSERT_TRUE(host.ok());
  ASSERT_EQ(chmod(host.path().c_str(), 0755), 0);
  std::ofstream(host.path() + "/secret") << "host secret\n";
  ASSERT_EQ(chmod((host.path() + "/secret").c_str(), 0644), 0);
  // bubblewrap resolves a bind's source below its /oldroot, gVisor's gofer from the host's /:
  // every depth of "..", so that one of them lands on the host's root from the session's
  // image mount (<mount_dir>/<uid>/image/etc) whatever the mount directory is.
  const char* const kEntries[] = {"/etc/nsswitch.conf", "/etc/mime.types", "/etc/protocols",
                                  "/etc/services",      "/etc/host.conf",  "/etc/inputrc",
                                  "/etc/timezone",      "/etc/ld.so.conf", "/etc/matplotlibrc"};
  std::string up;
  for (const char* entry : kEntries) {
    up += "../";
    ASSERT_EQ(symlink((up + host.path().substr(1) + "/secret").c_str(), (root + entry).c_str()), 0);
  }
  ASSERT_EQ(symlink((host.path() + "/secret").c_str(), (root + "/etc/alternatives").c_str()), 0);
  ASSERT_EQ(symlink(host.path().c_str(), (root + "/etc/ssl").c_str()), 0);
  ASSERT_EQ(
      symlink(("../../../../.." + host.path()).c_str(), (root + "/etc/ca-certificates").c_str()),
      0);
  ASSERT_EQ(symlink("/etc/shadow", (root + "/etc/ld.so.cache").c_str()), 0);
  SessionSpec spec;
  spec.root_dir = root;
  auto s = NewSession("imagehostile", spec);
  ASSERT_NE(s, nullptr);
  Output r = Sh(s.get(),
                "for f in /etc/* /etc/ssl/* /etc/ca-certificates/*; do cat \"$f\"; done; "
                "cat /proc/self/mountinfo");
  EXPECT_THAT(r.out, Not(HasSubstr("host secret")));
  EXPECT_THAT(r.out, Not(HasSubstr(host.path())));
  EXPECT_THAT(r.out, Not(HasSubstr("shadow")));
  EXPECT_TRUE(s->Close().ok());

  // /etc itself a link to the host's /etc: none of the host's /etc (python3.X included) is
  // bound; the sandbox has only the files the daemon writes.
  ::sandgate::testing::ScopedTempDir tmp2("sandgate-image-hostile-etc");
  const std::string root2 = MakeImageRoot(tmp2);
  ASSERT_FALSE(root2.empty());
  std::filesystem::remove(root2 + "/etc");
  ASSERT_EQ(symlink("/etc", (root2 + "/etc").c_str()), 0);
  spec.root_dir = root2;
  s = NewSession("imagehostile2", spec);
  ASSERT_NE(s, nullptr);
  r = Sh(s.get(), "echo /etc/*");
  EXPECT_EQ(r.out, "/etc/group /etc/hostname /etc/hosts /etc/passwd\n") << r.err;
  EXPECT_TRUE(s->Close().ok());
}

TEST_P(BwrapProviderTest, ConcurrentExecsInOneSession) {
  auto s = NewSession("concurrent");
  ASSERT_NE(s, nullptr);
  std::vector<std::thread> threads;
  std::vector<std::string> outs(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back(
        [&, i] { outs[i] = Sh(s.get(), absl::StrCat("sleep 0.2; echo ", i)).out; });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(outs[i], absl::StrCat(i, "\n"));
}

}  // namespace
}  // namespace sandgate::sandbox
