#include "store/postgres_connection.h"

#include <endian.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace sandgate::store {
namespace {

// The server's message without libpq's trailing newline.
std::string Message(const char* m) {
  return std::string(absl::StripTrailingAsciiWhitespace(m ? m : "unknown error"));
}

}  // namespace

std::vector<const char*> PgConnection::Pointers(const PgParams& params) {
  std::vector<const char*> out;
  out.reserve(params.values_.size());
  for (const std::string& v : params.values_) out.push_back(v.data());
  return out;
}

std::vector<int> PgConnection::Lengths(const PgParams& params) {
  std::vector<int> out;
  out.reserve(params.values_.size());
  for (const std::string& v : params.values_) out.push_back(static_cast<int>(v.size()));
  return out;
}

PgParams& PgParams::Text(absl::string_view v) {
  values_.emplace_back(v);
  formats_.push_back(0);
  return *this;
}

PgParams& PgParams::Int(int64_t v) { return Text(absl::StrCat(v)); }

PgParams& PgParams::Bytes(absl::string_view v) {
  values_.emplace_back(v);
  formats_.push_back(1);
  return *this;
}

PgParams& PgParams::Bytes(std::string&& v) {
  values_.push_back(std::move(v));
  formats_.push_back(1);
  return *this;
}

PgResult& PgResult::operator=(PgResult&& other) noexcept {
  if (this != &other) {
    PQclear(r_);
    r_ = other.r_;
    other.r_ = nullptr;
  }
  return *this;
}

PgResult::~PgResult() { PQclear(r_); }

int PgResult::rows() const { return PQntuples(r_); }

bool PgResult::IsNull(int row, int col) const { return PQgetisnull(r_, row, col) != 0; }

absl::string_view PgResult::Bytes(int row, int col) const {
  return absl::string_view(PQgetvalue(r_, row, col), PQgetlength(r_, row, col));
}

int64_t PgResult::Int(int row, int col) const {
  absl::string_view b = Bytes(row, col);
  if (b.size() == 8) {
    uint64_t v;
    std::memcpy(&v, b.data(), 8);
    return static_cast<int64_t>(be64toh(v));
  }
  if (b.size() == 4) {
    uint32_t v;
    std::memcpy(&v, b.data(), 4);
    return static_cast<int32_t>(be32toh(v));
  }
  return 0;  // NULL
}

int64_t PgResult::affected() const {
  const char* n = PQcmdTuples(r_);
  return n && *n ? std::strtoll(n, nullptr, 10) : 0;
}

PgConnection::~PgConnection() { PQfinish(conn_); }

bool PgConnection::broken() const { return PQstatus(conn_) != CONNECTION_OK; }

bool PgConnection::reusable() const {
  return !broken() && PQtransactionStatus(conn_) == PQTRANS_IDLE;
}

absl::StatusOr<PgResult> PgConnection::Exec(absl::string_view what, absl::string_view sql,
                                            const PgParams& params) {
  // Each statement is parsed and planned once per connection, then only executed: for the
  // per-event statements the parse cost about as much as the insert.
  auto it = prepared_.find(sql);
  if (it == prepared_.end()) {
    std::string name = absl::StrCat("sg", prepared_.size());
    std::string text(sql);  // NUL-terminated for libpq
    SANDGATE_RETURN_IF_ERROR(Check(what, PQprepare(conn_, name.c_str(), text.c_str(), params.size(),
                                                   /*paramTypes=*/nullptr))
                                 .status());
    it = prepared_.emplace(std::move(text), std::move(name)).first;
  }
  return Check(what,
               PQexecPrepared(conn_, it->second.c_str(), params.size(), Pointers(params).data(),
                              Lengths(params).data(), params.formats_.data(), /*resultFormat=*/1));
}

absl::Status PgConnection::Script(const char* sql) {
  return Check("migration", PQexec(conn_, sql)).status();
}

absl::StatusOr<PgResult> PgConnection::Check(absl::string_view what, PGresult* result) {
  PgResult r(result);
  PGresult* raw = r.r_;
  ExecStatusType status = raw ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return r;
  const char* state = raw ? PQresultErrorField(raw, PG_DIAG_SQLSTATE) : nullptr;
  const char* detail = raw ? PQresultErrorField(raw, PG_DIAG_MESSAGE_DETAIL) : nullptr;
  std::string message = Message(raw ? PQresultErrorMessage(raw) : PQerrorMessage(conn_));
  if (raw == nullptr || message.empty()) message = Message(PQerrorMessage(conn_));
  if (detail != nullptr && message.find(detail) == std::string::npos) {
    absl::StrAppend(&message, " (", detail, ")");
  }
  std::string text = absl::StrCat("postgres ", what, ": ", message);
  if (state != nullptr && std::strcmp(state, kPgUniqueViolation) == 0) {
    return absl::AlreadyExistsError(text);
  }
  if (broken()) return errors::Unavailable(text);
  return errors::Internal(text);
}

absl::Status PgConnection::Run(absl::string_view what, absl::string_view sql,
                               const PgParams& params) {
  return Exec(what, sql, params).status();
}

PgLease::~PgLease() {
  if (conn_ != nullptr) db_->Release(std::move(conn_));
}

absl::StatusOr<std::unique_ptr<PostgresDatabase>> PostgresDatabase::Open(
    const PostgresOptions& options) {
  // The password has one way in, its own keyword; a DSN holding one would put it in the
  // config file and in anything that prints the DSN.
  char* err = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(options.dsn.c_str(), &err);
  if (parsed == nullptr) {
    std::string why = Message(err);
    PQfreemem(err);
    return errors::InvalidArgument(absl::StrCat("store.dsn: not a libpq connection string: ", why));
  }
  bool has_password = false;
  for (PQconninfoOption* o = parsed; o->keyword != nullptr; ++o) {
    if (std::strcmp(o->keyword, "password") == 0 && o->val != nullptr) has_password = true;
  }
  PQconninfoFree(parsed);
  if (has_password) {
    return errors::InvalidArgument(
        "store.dsn: holds a password (password=…); put it in store.password_file instead");
  }
  if (options.pool_size < 1) return errors::InvalidArgument("postgres pool size: at least 1");
  std::unique_ptr<PostgresDatabase> db(new PostgresDatabase(options));
  auto first = db->Connect();
  if (!first.ok()) return first.status();
  absl::MutexLock lock(&db->mu_);
  db->idle_.push_back(std::move(*first));
  db->open_ = 1;
  return db;
}

PostgresDatabase::~PostgresDatabase() {
  absl::MutexLock lock(&mu_);
  idle_.clear();  // every lease must be gone by now
}

absl::StatusOr<std::unique_ptr<PgConnection>> PostgresDatabase::Connect() {
  // The DSN is expanded in place of dbname; the password comes after it, so it is the one
  // libpq uses.
  const char* keywords[] = {"dbname", "password", "application_name", nullptr};
  const char* values[] = {options_.dsn.c_str(), options_.password.c_str(), "sandgated", nullptr};
  if (options_.password.empty()) {
    keywords[1] = "application_name";
    values[1] = "sandgated";
    keywords[2] = nullptr;
    values[2] = nullptr;
  }
  PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (conn == nullptr) return errors::Unavailable("postgres connect: out of memory");
  std::unique_ptr<PgConnection> c(new PgConnection(conn));
  if (PQstatus(conn) != CONNECTION_OK) {
    return errors::Unavailable(absl::StrCat("postgres connect: ", Message(PQerrorMessage(conn))));
  }
  // Commits are not waited onto disk, as SqliteStore's WAL with synchronous=NORMAL: a killed
  // daemon loses nothing, a crashed server at most its last fraction of a second of
  // commits, never consistency. A durable journal record asks for the flush itself
  // (PostgresStore::Record).
  absl::Status st = c->Run("connect", "SET synchronous_commit = off");
  // Notices ("relation … already exists, skipping") would go to stderr, which is the
  // daemon's structured log.
  if (st.ok()) st = c->Run("connect", "SET client_min_messages = warning");
  if (!st.ok()) return st;
  return c;
}

absl::StatusOr<PgLease> PostgresDatabase::Acquire(absl::string_view what) {
  const absl::Time deadline = options_.clock->Now() + options_.acquire_timeout;
  mu_.Lock();
  auto can_take = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !idle_.empty() || open_ < options_.pool_size;
  };
  if (!options_.clock->AwaitWithDeadline(mu_, absl::Condition(&can_take), deadline)) {
    mu_.Unlock();
    return errors::Unavailable(absl::StrCat("postgres ", what, ": all ", options_.pool_size,
                                            " connections busy for ",
                                            absl::FormatDuration(options_.acquire_timeout)));
  }
  if (!idle_.empty()) {
    std::unique_ptr<PgConnection> conn = std::move(idle_.back());
    idle_.pop_back();
    mu_.Unlock();
    return PgLease(this, std::move(conn));
  }
  ++open_;
  mu_.Unlock();
  // Connecting takes a round trip or more: not under the lock.
  auto conn = Connect();
  if (!conn.ok()) {
    absl::MutexLock lock(&mu_);
    --open_;
    return absl::Status(conn.status().code(), absl::StrCat(what, ": ", conn.status().message()));
  }
  return PgLease(this, std::move(*conn));
}

absl::StatusOr<PgResult> PostgresDatabase::Exec(absl::string_view what, absl::string_view sql,
                                                const PgParams& params) {
  SANDGATE_ASSIGN_OR_RETURN(PgLease conn, Acquire(what));
  return conn->Exec(what, sql, params);
}

absl::Status PostgresDatabase::Run(absl::string_view what, absl::string_view sql,
                                   const PgParams& params) {
  return Exec(what, sql, params).status();
}

void PostgresDatabase::Release(std::unique_ptr<PgConnection> conn) {
  absl::MutexLock lock(&mu_);
  // A connection left inside a transaction (its ROLLBACK failed) would carry it into the
  // next holder's statements: closed like a broken one.
  if (!conn->reusable()) {
    --open_;  // the next Acquire opens a fresh one
    return;
  }
  idle_.push_back(std::move(conn));
}

absl::StatusOr<std::string> ReadPasswordFile(const std::string& path) {
  const std::string where = absl::StrCat("store.password_file ", path);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return errors::FromErrno(errno, where);
  struct stat st;
  std::string password;
  absl::Status status;
  if (fstat(fd, &st) != 0) {
    status = errors::FromErrno(errno, where);
  } else if (!S_ISREG(st.st_mode)) {
    status = errors::InvalidArgument(absl::StrCat(where, ": not a regular file"));
  } else if ((st.st_mode & 077) != 0) {
    status = errors::PermissionDenied(absl::StrFormat(
        "%s: group or others may read it (mode %04o); chmod 600 it", where, st.st_mode & 07777));
  } else {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) password.append(buf, n);
    if (n < 0) status = errors::FromErrno(errno, where);
  }
  close(fd);
  if (!status.ok()) return status;
  while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) {
    password.pop_back();
  }
  if (password.empty()) return errors::InvalidArgument(absl::StrCat(where, ": empty"));
  return password;
}

}  // namespace sandgate::store
