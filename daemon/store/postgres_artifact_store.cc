#include "store/postgres_artifact_store.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "store/postgres_schema.h"

namespace sandgate::store {
namespace {

// An upload's chunks carry the run id, so RemoveRun finds those of writers that never
// committed too. STORAGE EXTERNAL: out of line and uncompressed, so substring() fetches the
// slices a Read asks for (artifacts are mostly CSV, JSON, SVG: compression would save disk
// but cost a whole chunk's decompression per 256 KiB read).
constexpr const char* kSteps[] = {
    R"sql(
CREATE SEQUENCE artifact_uploads;
CREATE TABLE artifact_chunks (
  upload BIGINT NOT NULL,
  seq BIGINT NOT NULL,
  run_id TEXT NOT NULL,
  data BYTEA NOT NULL,
  PRIMARY KEY (upload, seq));
ALTER TABLE artifact_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
CREATE INDEX artifact_chunks_run ON artifact_chunks(run_id);
CREATE TABLE artifacts (
  run_id TEXT NOT NULL,
  name TEXT NOT NULL,
  upload BIGINT NOT NULL,
  size_bytes BIGINT NOT NULL,
  chunk_bytes BIGINT NOT NULL,
  sha256 TEXT NOT NULL,
  PRIMARY KEY (run_id, name));
)sql",
};

class PostgresWriter final : public ArtifactStore::Writer {
 public:
  PostgresWriter(PostgresDatabase* db, uint64_t chunk_bytes, int64_t upload, std::string run_id,
                 std::string name)
      : Writer(name),
        db_(db),
        chunk_bytes_(chunk_bytes),
        upload_(upload),
        run_id_(std::move(run_id)),
        name_(std::move(name)) {}

  ~PostgresWriter() override {
    if (published_ || seq_ == 0) return;
    // Best effort: chunks left behind (no connection now) are named by no artifact row, so
    // no reader sees them, and RemoveRun deletes them with the run.
    (void)db_->Run("discard artifact", "DELETE FROM artifact_chunks WHERE upload = $1",
                   PgParams().Int(upload_));
  }

 private:
  absl::Status Write(absl::string_view piece) override {
    while (!piece.empty()) {
      const size_t take = std::min<size_t>(piece.size(), chunk_bytes_ - pending_.size());
      pending_.append(piece.data(), take);
      piece.remove_prefix(take);
      if (pending_.size() == chunk_bytes_) SANDGATE_RETURN_IF_ERROR(Flush());
    }
    return absl::OkStatus();
  }

  absl::Status Flush() {
    SANDGATE_RETURN_IF_ERROR(
        db_->Run("store artifact",
                 "INSERT INTO artifact_chunks(upload, seq, run_id, data) VALUES($1, $2, $3, $4)",
                 PgParams().Int(upload_).Int(seq_).Text(run_id_).Bytes(std::move(pending_))));
    pending_ = std::string();
    ++seq_;
    return absl::OkStatus();
  }

  absl::Status Publish(const v1::Artifact& artifact) override {
    if (!pending_.empty()) SANDGATE_RETURN_IF_ERROR(Flush());
    SANDGATE_RETURN_IF_ERROR(db_->Transaction("commit artifact", [&](PgTx& tx) -> absl::Status {
      // The upload this one replaces, if any: its row changes below, so its chunks go.
      SANDGATE_RETURN_IF_ERROR(
          tx.Run("DELETE FROM artifact_chunks WHERE upload IN "
                 "(SELECT upload FROM artifacts WHERE run_id = $1 AND name = $2)",
                 PgParams().Text(run_id_).Text(name_)));
      return tx.Run(
          "INSERT INTO artifacts(run_id, name, upload, size_bytes, chunk_bytes, sha256) "
          "VALUES($1, $2, $3, $4, $5, $6) ON CONFLICT(run_id, name) DO UPDATE SET "
          "upload = excluded.upload, size_bytes = excluded.size_bytes, "
          "chunk_bytes = excluded.chunk_bytes, sha256 = excluded.sha256",
          PgParams()
              .Text(run_id_)
              .Text(name_)
              .Int(upload_)
              .Int(static_cast<int64_t>(artifact.size_bytes()))
              .Int(static_cast<int64_t>(chunk_bytes_))
              .Text(artifact.sha256()));
    }));
    published_ = true;
    return absl::OkStatus();
  }

  PostgresDatabase* const db_;
  const uint64_t chunk_bytes_;
  const int64_t upload_;
  const std::string run_id_, name_;
  std::string pending_;  // the chunk being filled, never above chunk_bytes_
  int64_t seq_ = 0;      // chunks inserted
  bool published_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresArtifactStore>> PostgresArtifactStore::Open(
    PostgresDatabase* db, uint64_t chunk_bytes) {
  if (chunk_bytes == 0 || chunk_bytes > (1u << 30)) {
    return errors::InvalidArgument(
        absl::StrCat("artifact chunk size: ", chunk_bytes, " bytes, must be 1 byte to 1 GiB"));
  }
  SANDGATE_RETURN_IF_ERROR(MigrateSchema(*db, "artifacts", kSteps));
  return std::unique_ptr<PostgresArtifactStore>(new PostgresArtifactStore(db, chunk_bytes));
}

absl::StatusOr<std::unique_ptr<ArtifactStore::Writer>> PostgresArtifactStore::Create(
    const std::string& run_id, const std::string& name) {
  SANDGATE_RETURN_IF_ERROR(CheckArtifactNames(run_id, name));
  SANDGATE_ASSIGN_OR_RETURN(PgResult r,
                            db_->Exec("create artifact", "SELECT nextval('artifact_uploads')"));
  return std::unique_ptr<Writer>(new PostgresWriter(db_, chunk_bytes_, r.Int(0, 0), run_id, name));
}

absl::StatusOr<std::string> PostgresArtifactStore::Read(const std::string& run_id,
                                                        const std::string& name, uint64_t offset,
                                                        uint64_t max_bytes) {
  if (!IsPlainFileName(run_id) || !IsPlainFileName(name)) return errors::NotFound("artifact", name);
  // Past any size an artifact can have (a bigint): empty, as past its end.
  offset = std::min<uint64_t>(offset, INT64_MAX);
  SANDGATE_ASSIGN_OR_RETURN(PgLease conn, db_->Acquire("read artifact"));
  // Most reads (a download's 256 KiB, inside one 1 MiB chunk) are this one statement: the
  // row and the slice of the chunk holding `offset`, in one snapshot.
  SANDGATE_ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec("read artifact",
                 "SELECT a.size_bytes, (SELECT substring(c.data FROM "
                 "($3::bigint % a.chunk_bytes)::integer + 1 FOR $4::integer) "
                 "FROM artifact_chunks c "
                 "WHERE c.upload = a.upload AND c.seq = $3::bigint / a.chunk_bytes) "
                 "FROM artifacts a WHERE a.run_id = $1 AND a.name = $2",
                 PgParams()
                     .Text(run_id)
                     .Text(name)
                     .Int(static_cast<int64_t>(offset))
                     .Int(static_cast<int64_t>(std::min<uint64_t>(max_bytes, 1u << 30)))));
  if (r.rows() == 0) return errors::NotFound("artifact", name);
  const uint64_t size = static_cast<uint64_t>(r.Int(0, 0));
  if (offset >= size) return std::string();
  const uint64_t want = std::min(max_bytes, size - offset);
  if (!r.IsNull(0, 1) && r.Bytes(0, 1).size() == want) return std::string(r.Bytes(0, 1));
  return ReadAcrossChunks(*conn, run_id, name, offset, max_bytes);
}

absl::StatusOr<std::string> PostgresArtifactStore::ReadAcrossChunks(PgConnection& conn,
                                                                    const std::string& run_id,
                                                                    const std::string& name,
                                                                    uint64_t offset,
                                                                    uint64_t max_bytes) {
  std::string out;
  SANDGATE_RETURN_IF_ERROR(conn.Transaction("read artifact", [&]() -> absl::Status {
    // One snapshot for the row and its chunks: a Commit replacing the artifact, or a purge,
    // between the statements does not tear what this Read returns.
    SANDGATE_RETURN_IF_ERROR(
        conn.Run("read artifact", "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"));
    SANDGATE_ASSIGN_OR_RETURN(PgResult a,
                              conn.Exec("read artifact",
                                        "SELECT upload, size_bytes, chunk_bytes FROM artifacts "
                                        "WHERE run_id = $1 AND name = $2",
                                        PgParams().Text(run_id).Text(name)));
    if (a.rows() == 0) return errors::NotFound("artifact", name);
    const int64_t upload = a.Int(0, 0);
    const uint64_t size = static_cast<uint64_t>(a.Int(0, 1));
    const uint64_t chunk = static_cast<uint64_t>(a.Int(0, 2));
    if (offset >= size) return absl::OkStatus();
    const uint64_t end = offset + std::min(max_bytes, size - offset);
    // Sized by what is there, not by max_bytes: a caller may ask for a whole artifact.
    out.reserve(end - offset);
    for (uint64_t at = offset; at < end;) {
      const uint64_t seq = at / chunk, from = at % chunk;
      const uint64_t len = std::min(end - at, chunk - from);
      SANDGATE_ASSIGN_OR_RETURN(
          PgResult c, conn.Exec("read artifact",
                                "SELECT substring(data FROM $3::integer + 1 FOR $4::integer) "
                                "FROM artifact_chunks WHERE upload = $1 AND seq = $2",
                                PgParams()
                                    .Int(upload)
                                    .Int(static_cast<int64_t>(seq))
                                    .Int(static_cast<int64_t>(from))
                                    .Int(static_cast<int64_t>(len))));
      if (c.rows() == 0 || c.IsNull(0, 0) || c.Bytes(0, 0).size() != len) {
        return errors::Internal(absl::StrCat("artifact ", run_id, "/", name, ": chunk ", seq,
                                             " is missing or short in the database"));
      }
      const absl::string_view bytes = c.Bytes(0, 0);
      out.append(bytes.data(), bytes.size());
      at += len;
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::Status PostgresArtifactStore::RemoveRun(const std::string& run_id) {
  if (!IsPlainFileName(run_id))
    return errors::InvalidArgument(absl::StrCat("run id: '", run_id, "'"));
  return db_->Transaction("remove artifacts", [&](PgTx& tx) -> absl::Status {
    SANDGATE_RETURN_IF_ERROR(
        tx.Run("DELETE FROM artifacts WHERE run_id = $1", PgParams().Text(run_id)));
    return tx.Run("DELETE FROM artifact_chunks WHERE run_id = $1", PgParams().Text(run_id));
  });
}

}  // namespace sandgate::store
