#include "tests/fakes/postgres_server.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "store/postgres_connection.h"

namespace sandgate::testing {
namespace {

std::string BinDir() {
  const char* env = std::getenv("SANDGATE_PG_BINDIR");
  return env && *env ? env : "/usr/lib/postgresql/15/bin";
}

// Root runs the server as nobody; anyone else as themselves.
struct RunAs {
  bool drop = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

absl::StatusOr<RunAs> ServerUser() {
  RunAs r;
  if (geteuid() != 0) return r;
  struct passwd* pw = getpwnam("nobody");
  if (pw == nullptr) return errors::FailedPrecondition("postgres fixture: no user `nobody`");
  r.drop = true;
  r.uid = pw->pw_uid;
  r.gid = pw->pw_gid;
  return r;
}

// Forks and execs argv as `as`, stdout and stderr to `log`; with `die_with_parent`, the
// child gets SIGQUIT (PostgreSQL's immediate shutdown) if this thread goes away.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const RunAs& as,
                            const std::string& log, bool die_with_parent) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return errors::FromErrno(errno, "postgres fixture: fork");
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    setpgid(0, 0);  // a ^C to the test reaches it only through its parent's death
    if (as.drop && (setgroups(0, nullptr) != 0 || setgid(as.gid) != 0 || setuid(as.uid) != 0)) {
      _exit(126);
    }
    // After setuid, which clears it.
    if (die_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGQUIT);
      if (getppid() != parent) _exit(1);
    }
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

absl::Status RunToEnd(const std::vector<std::string>& argv, const RunAs& as,
                      const std::string& log) {
  SANDGATE_ASSIGN_OR_RETURN(pid_t pid, Spawn(argv, as, log, /*die_with_parent=*/false));
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return errors::Internal(
        absl::StrCat("postgres fixture: ", argv[0], " failed (status ", status, "); see ", log));
  }
  return absl::OkStatus();
}

// A test killed outright (SIGKILL, a crash) takes its server with it (the parent-death
// signal) but leaves its directory: removed by the next fixture, once the process that
// made it (owner.pid) is gone. A directory without the file is being made right now.
void RemoveStaleDirectories() {
  DIR* tmp = opendir("/tmp");
  if (tmp == nullptr) return;
  while (dirent* e = readdir(tmp)) {
    if (std::strncmp(e->d_name, "sg-pg-", 6) != 0) continue;
    const std::string dir = std::string("/tmp/") + e->d_name;
    std::ifstream owner(dir + "/owner.pid");
    pid_t pid = 0;
    if (!(owner >> pid) || pid <= 0) continue;
    if (kill(pid, 0) != 0 && errno == ESRCH) std::system(("rm -rf '" + dir + "'").c_str());
  }
  closedir(tmp);
}

// Shared(): made once, deleted at exit.
PostgresServer* shared = nullptr;

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Start(bool fsync) {
  std::unique_ptr<PostgresServer> s(new PostgresServer());
  SANDGATE_RETURN_IF_ERROR(s->Init(fsync));
  return s;
}

absl::Status PostgresServer::Init(bool fsync) {
  RemoveStaleDirectories();
  char tmpl[] = "/tmp/sg-pg-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return errors::FromErrno(errno, "postgres fixture: mkdtemp");
  dir_ = tmpl;
  std::ofstream(dir_ + "/owner.pid") << getpid() << "\n";
  SANDGATE_ASSIGN_OR_RETURN(RunAs as, ServerUser());
  if (as.drop && chown(dir_.c_str(), as.uid, as.gid) != 0) {
    return errors::FromErrno(errno, "postgres fixture: chown " + dir_);
  }
  const std::string data = dir_ + "/data", log = dir_ + "/server.log";
  const std::string pwfile = dir_ + "/initdb.pw";
  {
    // initdb sets the superuser's password from a file; the superuser still logs in by
    // trust (pg_hba below), the file only makes initdb's scram setup complete.
    std::ofstream(pwfile) << "unused\n";
    if (as.drop) (void)chown(pwfile.c_str(), as.uid, as.gid);
  }
  SANDGATE_RETURN_IF_ERROR(
      RunToEnd({BinDir() + "/initdb", "-D", data, "-U", "sandgate", "--auth-local=trust",
                "--auth-host=reject", "-E", "UTF8", "--no-sync", "--pwfile=" + pwfile},
               as, log));
  {
    std::ofstream hba(data + "/pg_hba.conf", std::ios::trunc);
    hba << "local all " << kPasswordUser << " scram-sha-256\n"
        << "local all all trust\n";
  }
  // Durability is not what tests check: fsync off keeps the suite fast on a shared disk.
  SANDGATE_ASSIGN_OR_RETURN(
      pid_, Spawn({BinDir() + "/postgres", "-D", data, "-k", dir_, "-c", "listen_addresses=", "-c",
                   fsync ? "fsync=on" : "fsync=off", "-c", "max_connections=200", "-c",
                   "shared_buffers=32MB"},
                  as, log, /*die_with_parent=*/true));
  const std::string ping = Dsn("postgres");
  const absl::Time deadline = Clock::Real()->Now() + absl::Seconds(60);
  while (PQping(ping.c_str()) != PQPING_OK) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return errors::Internal(absl::StrCat("postgres fixture: the server exited; see ", log));
    }
    if (Clock::Real()->Now() > deadline) {
      return errors::DeadlineExceeded(
          absl::StrCat("postgres fixture: no answer in 60 s; see ", log));
    }
    Clock::Real()->SleepFor(absl::Milliseconds(20));
  }
  store::PostgresOptions o;
  o.dsn = ping;
  o.pool_size = 1;
  SANDGATE_ASSIGN_OR_RETURN(auto db, store::PostgresDatabase::Open(o));
  SANDGATE_ASSIGN_OR_RETURN(store::PgLease conn, db->Acquire("create password user"));
  const std::string role =
      absl::StrCat("CREATE ROLE ", kPasswordUser, " LOGIN SUPERUSER PASSWORD '", kPassword, "'");
  return conn->Run("create password user", role.c_str());
}

PostgresServer::~PostgresServer() {
  if (pid_ > 0) {
    kill(pid_, SIGQUIT);  // immediate shutdown: nothing here is worth a checkpoint
    int status;
    waitpid(pid_, &status, 0);
  }
  if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
}

PostgresServer& PostgresServer::Shared() {
  static absl::once_flag once;
  absl::call_once(once, [] {
    auto s = Start();
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.status().message()).c_str());
      std::abort();
    }
    shared = s->release();
    std::atexit([] { delete shared; });
  });
  return *shared;
}

absl::StatusOr<std::string> PostgresServer::CreateDatabase() {
  std::string name;
  {
    absl::MutexLock lock(&mu_);
    name = absl::StrCat("t", ++databases_);
  }
  store::PostgresOptions o;
  o.dsn = Dsn("postgres");
  o.pool_size = 1;
  SANDGATE_ASSIGN_OR_RETURN(auto db, store::PostgresDatabase::Open(o));
  SANDGATE_ASSIGN_OR_RETURN(store::PgLease conn, db->Acquire("create database"));
  // A name of our own making: identifiers cannot be parameters.
  const std::string sql = absl::StrCat("CREATE DATABASE ", name);
  SANDGATE_RETURN_IF_ERROR(conn->Run("create database", sql.c_str()));
  return Dsn(name);
}

std::string PostgresServer::Dsn(const std::string& db, const std::string& user) const {
  return absl::StrCat("host=", dir_, " dbname=", db, " user=", user);
}

absl::StatusOr<int64_t> QueryCount(const std::string& dsn, const char* sql) {
  store::PostgresOptions o;
  o.dsn = dsn;
  o.pool_size = 1;
  SANDGATE_ASSIGN_OR_RETURN(auto db, store::PostgresDatabase::Open(o));
  SANDGATE_ASSIGN_OR_RETURN(store::PgLease conn, db->Acquire("count"));
  SANDGATE_ASSIGN_OR_RETURN(store::PgResult r, conn->Exec("count", sql));
  if (r.rows() != 1) return errors::Internal(absl::StrCat("count: ", r.rows(), " rows"));
  return r.Int(0, 0);
}

}  // namespace sandgate::testing
