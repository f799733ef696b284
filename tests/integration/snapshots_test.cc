// Snapshots on the real daemon (docs/sessions.md, "Snapshots"): a workspace saved and
// restored with its files, modes, directories and links; pause and resume; tenants; the size
// bound; and hostile archives planted in the daemon's store, each refused by the restore with
// nothing written outside the new session's workspace.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "core/sandbox_spec.h"
#include "gtest/gtest.h"
#include "store/sqlite_snapshot_store.h"
#include "tests/fakes/tar_builder.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {
namespace {

constexpr char kToken[] = "snapshots-token";
constexpr char kOtherToken[] = "snapshots-other";
constexpr char kOpsToken[] = "snapshots-ops";

struct Ran {
  std::string out, err;
  int exit_code = -1;
  grpc::Status status;
};

class SnapshotsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<DaemonHarness>(nlohmann::json{
        {"tenants",
         {{{"name", "a"}, {"token_sha256", Sha256::Hex(kToken)}},
          {{"name", "b"}, {"token_sha256", Sha256::Hex(kOtherToken)}},
          {{"name", "ops"}, {"token_sha256", Sha256::Hex(kOpsToken)}, {"operator", true}}}},
        {"local", {{"uid_base", 301300}, {"uid_count", 16}}},
        {"snapshots", {{"max_bytes", 4 << 20}}}});
    daemon_->Start();
    stub_ = daemon_->Stub();
  }

  v1::Session Create(const std::string& setup = "") {
    v1::CreateSessionRequest req;
    req.mutable_sandbox()->mutable_idle_timeout()->set_seconds(600);
    (*req.mutable_sandbox()->mutable_env())["FROM_SPEC"] = "kept";
    if (!setup.empty()) req.mutable_sandbox()->add_setup_commands(setup);
    v1::Session s;
    grpc::Status st = stub_->CreateSession(DaemonHarness::Context(kToken).get(), req, &s);
    EXPECT_TRUE(st.ok()) << st.error_message() << daemon_->Log();
    return s;
  }

  Ran Exec(const std::string& id, const std::string& command) {
    v1::ExecRequest req;
    req.set_session_id(id);
    req.set_command(command);
    auto ctx = DaemonHarness::Context(kToken);
    auto reader = stub_->Exec(ctx.get(), req);
    Ran r;
    v1::ExecResponse m;
    while (reader->Read(&m)) {
      if (m.has_output()) {
        (m.output().stream() == v1::CommandOutput::STREAM_STDERR ? r.err : r.out) +=
            m.output().data();
      }
      if (m.has_finished()) r.exit_code = m.finished().exit_code();
    }
    r.status = reader->Finish();
    return r;
  }

  grpc::Status Snapshot(const std::string& session, v1::Snapshot* out, bool close = false,
                        const std::string& token = kToken) {
    v1::SnapshotSessionRequest req;
    req.set_session_id(session);
    req.set_close(close);
    return stub_->SnapshotSession(DaemonHarness::Context(token).get(), req, out);
  }

  grpc::Status Restore(const std::string& snapshot, v1::Session* out,
                       const std::string& token = kToken) {
    v1::CreateSessionRequest req;
    req.set_from_snapshot(snapshot);
    return stub_->CreateSession(DaemonHarness::Context(token).get(), req, out);
  }

  // A snapshot record and its tar put straight into the daemon's store, as if it had taken
  // it: how a hostile archive reaches a restore.
  std::string Plant(const std::string& tar) {
    const std::string id = absl::StrCat("snap-planted", planted_++);
    const std::string dir = absl::StrCat(daemon_->state_dir(), "/artifacts/", id);
    EXPECT_EQ(mkdir(dir.c_str(), 0700), 0);
    std::ofstream(dir + "/workspace.tar", std::ios::binary) << tar;
    auto store = store::SqliteSnapshotStore::Open(daemon_->state_dir() + "/state.db");
    EXPECT_TRUE(store.ok()) << store.status();
    v1::Snapshot s;
    s.set_id(id);
    s.set_tenant("a");
    s.set_session_id("s-planted");
    s.set_provider("local");
    s.set_size_bytes(tar.size());
    *s.mutable_created_at() = core::ToProto(absl::Now());
    EXPECT_TRUE((*store)->Create(s).ok());
    return id;
  }

  size_t LiveSessions() {
    v1::ListSessionsResponse r;
    EXPECT_TRUE(stub_->ListSessions(DaemonHarness::Context(kToken).get(), {}, &r).ok());
    return static_cast<size_t>(r.sessions_size());
  }

  // Restoring `tar` fails with `code` and a message holding `says`, and the session made for
  // it is closed.
  void ExpectRefused(const std::string& tar, grpc::StatusCode code, const std::string& says) {
    const size_t live = LiveSessions();
    v1::Session s;
    grpc::Status st = Restore(Plant(tar), &s);
    EXPECT_EQ(st.error_code(), code) << st.error_message();
    EXPECT_TRUE(absl::StrContains(st.error_message(), says)) << st.error_message();
    EXPECT_EQ(LiveSessions(), live) << "the session made for a refused restore stays open";
  }

  std::unique_ptr<DaemonHarness> daemon_;
  std::unique_ptr<v1::Sandgate::Stub> stub_;
  int planted_ = 0;
};

// Every entry of the workspace with its type, mode, size and link target, as `find` sees it.
constexpr char kListing[] =
    "cd /work && find . -mindepth 1 ! -name '.*.tmp*' -printf '%p %y %m %s %l\\n' | sort";

TEST_F(SnapshotsTest, AWorkspaceIsRestoredWithItsModesDirectoriesAndLinks) {
  v1::Session s = Create("echo from-setup > setup.txt");
  Ran made = Exec(s.id(),
                  "set -e; mkdir -p src/deep empty private; echo 'print(42)' > src/main.py;"
                  "chmod 0750 src/main.py; chmod 0700 private; echo secret > private/key;"
                  "chmod 0400 private/key; printf 'x%.0s' $(seq 1 100000) > src/deep/big.txt;"
                  "ln -s src/main.py latest; ln -s /etc/hostname outside; ln src/main.py hard;"
                  "touch 'with space' .hidden; head -c 3000000 /dev/urandom > random.bin");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  Ran before = Exec(s.id(), kListing);
  ASSERT_EQ(before.exit_code, 0);
  Ran sum_before = Exec(s.id(), "cd /work && sha256sum random.bin src/deep/big.txt");

  v1::Snapshot snap;
  grpc::Status st = Snapshot(s.id(), &snap);
  ASSERT_TRUE(st.ok()) << st.error_message() << daemon_->Log();
  EXPECT_TRUE(absl::StartsWith(snap.id(), "snap-"));
  EXPECT_EQ(snap.session_id(), s.id());
  EXPECT_EQ(snap.tenant(), "a");
  EXPECT_GT(snap.size_bytes(), 3000000u);
  EXPECT_EQ(snap.sha256().size(), 64u);
  EXPECT_GE(snap.files(), 12u);
  EXPECT_EQ(snap.sandbox().env().at("FROM_SPEC"), "kept");

  v1::Session copy;
  st = Restore(snap.id(), &copy);
  ASSERT_TRUE(st.ok()) << st.error_message() << daemon_->Log();
  EXPECT_NE(copy.id(), s.id());
  Ran after = Exec(copy.id(), kListing);
  // The hard link is a file of its own now (a snapshot holds no hard links): the same
  // listing, since find's %s is its size.
  EXPECT_EQ(after.out, before.out);
  EXPECT_EQ(Exec(copy.id(), "cd /work && sha256sum random.bin src/deep/big.txt").out,
            sum_before.out);
  EXPECT_EQ(Exec(copy.id(), "cat /work/private/key; readlink /work/latest").out,
            "secret\nsrc/main.py\n");
  // With no sandbox of its own, the restore's session has the snapshot's (its env), and its
  // setup commands did not run again over the restored files.
  EXPECT_EQ(Exec(copy.id(), "echo $FROM_SPEC").out, "kept\n");
  EXPECT_EQ(Exec(copy.id(), "cat /work/setup.txt").out, "from-setup\n");
  // The original is untouched and still live.
  EXPECT_EQ(Exec(s.id(), "echo alive").out, "alive\n");
}

// The CLI, as docs/sessions.md shows it: session snapshot, snapshot list, session create
// --from-snapshot, session pause / resume, snapshot rm.
std::string Cli(const DaemonHarness& d, const std::string& args, int* code) {
  const std::string cmd = absl::StrCat("SANDGATE_TOKEN=", kToken, " ", SANDGATE_CLI_PATH,
                                       " --addr ", d.address(), " ", args, " 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  for (size_t n; p != nullptr && (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = p ? pclose(p) : -1;
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST_F(SnapshotsTest, TheCliTakesListsRestoresPausesAndRemovesSnapshots) {
  v1::Session s = Create();
  ASSERT_EQ(Exec(s.id(), "echo cli > /work/cli.txt").exit_code, 0);
  int code;
  std::string snap = Cli(*daemon_, absl::StrCat("session snapshot ", s.id()), &code);
  ASSERT_EQ(code, 0) << snap;
  snap = snap.substr(0, snap.find('\n'));
  EXPECT_TRUE(absl::StartsWith(snap, "snap-")) << snap;
  std::string list = Cli(*daemon_, absl::StrCat("snapshot list --session ", s.id()), &code);
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(absl::StrContains(list, snap)) << list;
  std::string copy = Cli(*daemon_, "session create --from-snapshot " + snap, &code);
  ASSERT_EQ(code, 0) << copy;
  copy = copy.substr(0, copy.find('\n'));
  EXPECT_EQ(Exec(copy, "cat /work/cli.txt").out, "cli\n");
  std::string paused = Cli(*daemon_, "session pause " + copy, &code);
  ASSERT_EQ(code, 0) << paused;
  paused = paused.substr(0, paused.find('\n'));
  std::string resumed = Cli(*daemon_, "session resume " + paused, &code);
  ASSERT_EQ(code, 0) << resumed;
  EXPECT_EQ(Exec(resumed.substr(0, resumed.find('\n')), "cat /work/cli.txt").out, "cli\n");
  EXPECT_EQ(Cli(*daemon_, absl::StrCat("snapshot rm ", snap, " ", paused), &code), "");
  EXPECT_EQ(code, 0);
  std::string gone = Cli(*daemon_, "snapshot get " + snap, &code);
  EXPECT_NE(code, 0);
  EXPECT_TRUE(absl::StrContains(gone, "sandgate snapshot get: NOT_FOUND: no snapshot " + snap))
      << gone;
}

TEST_F(SnapshotsTest, PauseClosesTheSessionAndResumeBringsItsWorkspaceBack) {
  v1::Session s = Create();
  ASSERT_EQ(Exec(s.id(), "echo notes > /work/notes.md").exit_code, 0);
  v1::Snapshot snap;
  ASSERT_TRUE(Snapshot(s.id(), &snap, /*close=*/true).ok());
  v1::GetSessionRequest get;
  get.set_session_id(s.id());
  v1::Session closed;
  ASSERT_TRUE(stub_->GetSession(DaemonHarness::Context(kToken).get(), get, &closed).ok());
  EXPECT_EQ(closed.status(), v1::SESSION_STATUS_CLOSED);
  EXPECT_TRUE(absl::StrContains(closed.status_reason(), "paused into snapshot " + snap.id()))
      << closed.status_reason();
  v1::Session resumed;
  ASSERT_TRUE(Restore(snap.id(), &resumed).ok());
  EXPECT_EQ(Exec(resumed.id(), "cat /work/notes.md").out, "notes\n");
}

TEST_F(SnapshotsTest, AnotherTenantsSnapshotIsNotFoundLikeOneThatDoesNotExist) {
  v1::Session s = Create();
  v1::Snapshot snap;
  ASSERT_TRUE(Snapshot(s.id(), &snap).ok());
  const std::string missing = "snap-00000000000000000000000000000000";
  auto message = [](const grpc::Status& st, const std::string& id) {
    std::string m = st.error_message();
    const size_t at = m.find(id);
    return at == std::string::npos ? m : m.replace(at, id.size(), "ID");
  };
  v1::GetSnapshotRequest get;
  v1::Snapshot got;
  get.set_snapshot_id(snap.id());
  grpc::Status theirs = stub_->GetSnapshot(DaemonHarness::Context(kOtherToken).get(), get, &got);
  get.set_snapshot_id(missing);
  grpc::Status none = stub_->GetSnapshot(DaemonHarness::Context(kOtherToken).get(), get, &got);
  EXPECT_EQ(theirs.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(message(theirs, snap.id()), message(none, missing));

  v1::Session stolen;
  grpc::Status restore = Restore(snap.id(), &stolen, kOtherToken);
  EXPECT_EQ(restore.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(message(restore, snap.id()), message(Restore(missing, &stolen, kOtherToken), missing));

  v1::DeleteSnapshotRequest del;
  del.set_snapshot_id(snap.id());
  v1::DeleteSnapshotResponse deleted;
  EXPECT_EQ(
      stub_->DeleteSnapshot(DaemonHarness::Context(kOtherToken).get(), del, &deleted).error_code(),
      grpc::StatusCode::NOT_FOUND);
  v1::ListSnapshotsResponse list;
  ASSERT_TRUE(stub_->ListSnapshots(DaemonHarness::Context(kOtherToken).get(), {}, &list).ok());
  EXPECT_EQ(list.snapshots_size(), 0);
  // B cannot snapshot A's session either.
  v1::Snapshot other;
  EXPECT_EQ(Snapshot(s.id(), &other, false, kOtherToken).error_code(), grpc::StatusCode::NOT_FOUND);

  // Its owner lists, deletes it; then it is gone, tar and all.
  ASSERT_TRUE(stub_->ListSnapshots(DaemonHarness::Context(kToken).get(), {}, &list).ok());
  ASSERT_EQ(list.snapshots_size(), 1);
  ASSERT_TRUE(stub_->DeleteSnapshot(DaemonHarness::Context(kToken).get(), del, &deleted).ok());
  EXPECT_EQ(Restore(snap.id(), &stolen).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(access((daemon_->state_dir() + "/artifacts/" + snap.id()).c_str(), F_OK), -1);
}

// ListSnapshots in pages (core::PageOfSnapshots): a walk of page_size 2 is the whole
// listing, page_size 0 still every snapshot; another tenant's walk with this tenant's token
// shows only its own; bad sizes and tokens are INVALID_ARGUMENT.
TEST_F(SnapshotsTest, ListSnapshotsPagesWithATokenAndZeroIsEverySnapshot) {
  v1::Session s = Create();
  for (int i = 0; i < 3; ++i) {
    v1::Snapshot snap;
    ASSERT_TRUE(Snapshot(s.id(), &snap).ok());
  }
  auto list = [&](const std::string& token, uint32_t size, const std::string& page_token,
                  v1::ListSnapshotsResponse* out) {
    v1::ListSnapshotsRequest req;
    req.set_page_size(size);
    req.set_page_token(page_token);
    out->Clear();
    return stub_->ListSnapshots(DaemonHarness::Context(token).get(), req, out);
  };
  v1::ListSnapshotsResponse all;
  ASSERT_TRUE(list(kToken, 0, "", &all).ok());
  ASSERT_EQ(all.snapshots_size(), 3);
  EXPECT_EQ(all.next_page_token(), "");
  v1::ListSnapshotsResponse first, second;
  ASSERT_TRUE(list(kToken, 2, "", &first).ok());
  ASSERT_EQ(first.snapshots_size(), 2);
  ASSERT_NE(first.next_page_token(), "");
  ASSERT_TRUE(list(kToken, 2, first.next_page_token(), &second).ok());
  ASSERT_EQ(second.snapshots_size(), 1);
  EXPECT_EQ(second.next_page_token(), "");
  EXPECT_EQ(first.snapshots(0).id(), all.snapshots(0).id());
  EXPECT_EQ(first.snapshots(1).id(), all.snapshots(1).id());
  EXPECT_EQ(second.snapshots(0).id(), all.snapshots(2).id());
  // Tenant b holding a's cursor walks its own (empty) listing.
  v1::ListSnapshotsResponse theirs;
  ASSERT_TRUE(list(kOtherToken, 2, first.next_page_token(), &theirs).ok());
  EXPECT_EQ(theirs.snapshots_size(), 0);
  v1::ListSnapshotsResponse bad;
  grpc::Status st = list(kToken, 501, "", &bad);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(st.error_message(), "page_size: at most 500"))
      << st.error_message();
  for (const std::string& token : {std::string("../../etc/passwd"), std::string(5000, 'x'),
                                   std::string("1.snap-") + std::string(32, 'Z')}) {
    st = list(kToken, 2, token, &bad);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << token.substr(0, 20);
    EXPECT_TRUE(absl::StrContains(st.error_message(), "page_token: not a token from ListSnapshots"))
        << st.error_message();
    EXPECT_LT(st.error_message().size(), 200u);
  }
}

TEST_F(SnapshotsTest, RetentionPurgesSnapshotsWithTheRuns) {
  v1::Session s = Create();
  v1::Snapshot snap;
  ASSERT_TRUE(Snapshot(s.id(), &snap).ok());
  // A purge of what is older than an hour keeps it; one of everything takes it, tar and all.
  v1::PurgeRequest purge;
  purge.mutable_older_than()->set_seconds(3600);
  v1::PurgeResponse purged;
  ASSERT_TRUE(stub_->Purge(DaemonHarness::Context(kOpsToken).get(), purge, &purged).ok());
  v1::GetSnapshotRequest get;
  get.set_snapshot_id(snap.id());
  v1::Snapshot got;
  EXPECT_TRUE(stub_->GetSnapshot(DaemonHarness::Context(kToken).get(), get, &got).ok());
  purge.mutable_older_than()->set_seconds(0);
  ASSERT_TRUE(stub_->Purge(DaemonHarness::Context(kOpsToken).get(), purge, &purged).ok());
  EXPECT_EQ(stub_->GetSnapshot(DaemonHarness::Context(kToken).get(), get, &got).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(access((daemon_->state_dir() + "/artifacts/" + snap.id()).c_str(), F_OK), -1);
}

TEST_F(SnapshotsTest, AWorkspaceOverTheBoundIsRefusedAndNothingIsKept) {
  v1::Session s = Create();
  ASSERT_EQ(Exec(s.id(), "head -c 6000000 /dev/urandom > /work/big.bin").exit_code, 0);
  v1::Snapshot snap;
  grpc::Status st = Snapshot(s.id(), &snap);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(st.error_message(), "snapshots.max_bytes")) << st.error_message();
  v1::ListSnapshotsResponse list;
  ASSERT_TRUE(stub_->ListSnapshots(DaemonHarness::Context(kToken).get(), {}, &list).ok());
  EXPECT_EQ(list.snapshots_size(), 0);
  EXPECT_EQ(std::system(("test -z \"$(ls -A " + daemon_->state_dir() + "/artifacts)\"").c_str()),
            0);
  // A fifo cannot be kept either: said, not skipped.
  ASSERT_EQ(Exec(s.id(), "rm /work/big.bin && mkfifo /work/pipe").exit_code, 0);
  st = Snapshot(s.id(), &snap);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(st.error_message(), "'pipe' is a fifo")) << st.error_message();
}

TEST_F(SnapshotsTest, HostileArchivesAreRefusedAndNothingLeavesTheWorkspace) {
  using grpc::StatusCode;
  // Where an escape would land on the host, and a directory a link could point at.
  const std::string target = absl::StrCat("/tmp/sg-snapshot-escape-", getpid());
  ASSERT_EQ(std::system(("rm -rf " + target + " && mkdir -p " + target).c_str()), 0);
  const std::string escape = target.substr(1) + "/escaped";  // relative: "tmp/sg-…/escaped"

  ExpectRefused(TarBuilder().File(target + "/abs", "x").Finish(), StatusCode::INVALID_ARGUMENT,
                "an absolute path");
  ExpectRefused(TarBuilder().File("../../../../../../" + escape, "x").Finish(),
                StatusCode::INVALID_ARGUMENT, "'..' component");
  ExpectRefused(TarBuilder().Symlink("out", target).File("out/through-link", "x").Finish(),
                StatusCode::INVALID_ARGUMENT, "below 'out', a symbolic link of the archive");
  ExpectRefused(TarBuilder().Entry('3', "tty", "", 0666, "").Finish(), StatusCode::INVALID_ARGUMENT,
                "a character device");
  ExpectRefused(TarBuilder().Entry('4', "sda", "", 0666, "").Finish(), StatusCode::INVALID_ARGUMENT,
                "a block device");
  ExpectRefused(TarBuilder().HardLink("shadow", "/etc/shadow").Finish(),
                StatusCode::INVALID_ARGUMENT, "a hard link");
  ExpectRefused(TarBuilder().HardLink("up", "../../../../etc/passwd").Finish(),
                StatusCode::INVALID_ARGUMENT, "a hard link");
  // A header claiming far more than the bound: refused before any byte is written.
  ExpectRefused(TarBuilder().Entry('0', "huge", "", 0644, "", int64_t{1} << 32).Finish(),
                StatusCode::RESOURCE_EXHAUSTED, "snapshots.max_bytes");
  // Files adding up past the bound, each small.
  TarBuilder many;
  for (int i = 0; i < 5; ++i) many.File(absl::StrCat("f", i), std::string(1 << 20, 'z'));
  ExpectRefused(many.Finish(), StatusCode::RESOURCE_EXHAUSTED, "snapshots.max_bytes");
  ExpectRefused(TarBuilder().File("a", "x").bytes().substr(0, 600), StatusCode::INVALID_ARGUMENT,
                "ends inside");
  ExpectRefused(std::string(2048, 'J'), StatusCode::INVALID_ARGUMENT, "wrong checksum");
  // Nothing reached the host.
  EXPECT_EQ(std::system(("test -z \"$(ls -A " + target + ")\"").c_str()), 0)
      << "a hostile archive wrote outside its workspace";
  EXPECT_EQ(std::system(("rm -rf " + target).c_str()), 0);

  // Setuid, setgid and sticky bits are dropped; a link pointing out is restored as a link,
  // never followed by the daemon.
  v1::Session s;
  grpc::Status st = Restore(Plant(TarBuilder()
                                      .File("suid", "#!/bin/sh\nid\n", 06755)
                                      .Dir("sticky", 01777)
                                      .Symlink("passwd", "/etc/passwd")
                                      .Finish()),
                            &s);
  ASSERT_TRUE(st.ok()) << st.error_message() << daemon_->Log();
  EXPECT_EQ(Exec(s.id(), "cd /work && stat -c '%a %n' suid sticky && readlink passwd").out,
            "755 suid\n777 sticky\n/etc/passwd\n");
  v1::DownloadFileRequest down;
  down.set_session_id(s.id());
  down.set_path("passwd");
  auto ctx = DaemonHarness::Context(kToken);
  auto reader = stub_->DownloadFile(ctx.get(), down);
  v1::FileChunk chunk;
  std::string data;
  while (reader->Read(&chunk)) data += chunk.data();
  EXPECT_FALSE(reader->Finish().ok()) << "the daemon followed a restored link";
  EXPECT_FALSE(absl::StrContains(data, "root:"));
}

}  // namespace
}  // namespace sandgate::testing
