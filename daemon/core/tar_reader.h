// TarReader: a streaming reader of the tar archives a snapshot holds, which refuses whatever
// could reach outside the place it is restored to (docs/sessions.md, "Snapshots").
//
// It takes the archive in pieces of any size and tells a sink of each entry: its header,
// then (files) its bytes, then its end. Entries are checked before the sink sees them:
//   - a path is relative and plain: no leading "/", no "." or ".." component, no empty
//     component ("a//b"), at most 4096 bytes (a leading "./", as tar writes, is dropped);
//   - only regular files, directories and symbolic links: a hard link, a device node, a
//     fifo, a sparse file or an unknown type is INVALID_ARGUMENT naming the entry;
//   - nothing is named twice, and nothing lies below a symbolic link of the archive or is
//     made into one after something was placed below it (a link pointing out, then a file
//     written through it);
//   - the setuid, setgid and sticky bits are dropped: `mode` is the permission bits only;
//   - the regular files' bytes add up to at most `max_content_bytes`, the entries to at most
//     `max_entries` (RESOURCE_EXHAUSTED naming the limit).
// A link's target is not checked: a link is restored as a link and never followed by the
// daemon (every file call refuses a link on its path).
//
// Formats: ustar and GNU tar (long names, 'L'/'K'), and pax extended headers ('x': path,
// linkpath, size); headers whose checksum is wrong are INVALID_ARGUMENT.
//
//   TarReader reader({.max_entries = 1000, .max_content_bytes = 1 << 30});
//   for (piece : archive) SANDGATE_RETURN_IF_ERROR(reader.Feed(piece, sink));
//   SANDGATE_RETURN_IF_ERROR(reader.Finish());
//
// Not thread safe.
#ifndef SANDGATE_CORE_TAR_READER_H_
#define SANDGATE_CORE_TAR_READER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sandgate::core {

struct TarEntry {
  enum class Type { kFile, kDirectory, kSymlink };
  Type type = Type::kFile;
  std::string path;         // relative, checked; a directory's without its trailing '/'
  uint32_t mode = 0;        // permission bits only (& 0777)
  uint64_t size = 0;        // files: the bytes that follow
  std::string link_target;  // symbolic links
};

// What an archive's entries are given to; an error stops the reading and is Feed's error.
struct TarSink {
  std::function<absl::Status(const TarEntry&)> entry;
  std::function<absl::Status(absl::string_view)> data;  // a file's bytes, in order
  std::function<absl::Status()> end;                    // after each entry's last byte
};

class TarReader {
 public:
  struct Limits {
    uint64_t max_entries = 100000;
    uint64_t max_content_bytes = 1ull << 30;
  };
  explicit TarReader(Limits limits) : limits_(limits) {}

  absl::Status Feed(absl::string_view piece, const TarSink& sink);
  // The archive ended: INVALID_ARGUMENT when inside an entry or a header.
  absl::Status Finish() const;

  uint64_t entries() const { return entries_; }
  uint64_t content_bytes() const { return content_bytes_; }

 private:
  enum class State { kHeader, kMeta, kData, kPadding, kEnd };
  absl::Status Header(const TarSink& sink);
  absl::Status Meta();
  // The entry's path checked against the rules above and those seen before it.
  absl::Status CheckPath(const std::string& path, TarEntry::Type type);

  const Limits limits_;
  State state_ = State::kHeader;
  std::string block_;     // the header being gathered (512 bytes)
  char meta_type_ = 0;    // 'x', 'L' or 'K' while in kMeta
  std::string meta_;      // its data
  uint64_t left_ = 0;     // bytes of data (kMeta, kData) or padding still to come
  uint64_t padding_ = 0;  // padding after the data
  // Set by the extended headers, for the next entry only.
  std::string next_path_, next_link_;
  bool have_next_size_ = false;
  uint64_t next_size_ = 0;
  std::string current_;  // the entry being read, for errors
  uint64_t entries_ = 0, content_bytes_ = 0;
  absl::flat_hash_set<std::string> named_;     // every entry's path
  absl::flat_hash_set<std::string> parents_;   // the directories above them
  absl::flat_hash_set<std::string> symlinks_;  // the archive's symbolic links
};

}  // namespace sandgate::core

#endif  // SANDGATE_CORE_TAR_READER_H_
