#include "core/tar_reader.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace sandgate::core {
namespace {

constexpr size_t kBlock = 512;
constexpr size_t kMaxPath = 4096;
constexpr uint64_t kMaxMeta = 1 << 20;  // an extended header's data

// The field [at, at + len) of a header up to its first NUL.
absl::string_view Field(const std::string& h, size_t at, size_t len) {
  absl::string_view f(h.data() + at, len);
  size_t nul = f.find('\0');
  return nul == absl::string_view::npos ? f : f.substr(0, nul);
}

// An octal number field, or GNU's base-256 (the first byte's high bit set).
bool Number(const std::string& h, size_t at, size_t len, uint64_t* out) {
  const unsigned char first = static_cast<unsigned char>(h[at]);
  if (first & 0x80) {
    if (first != 0x80) return false;  // negative, or too large
    uint64_t v = 0;
    for (size_t i = 1; i < len; ++i) {
      if (v >> 56) return false;
      v = (v << 8) | static_cast<unsigned char>(h[at + i]);
    }
    *out = v;
    return true;
  }
  absl::string_view f = Field(h, at, len);
  while (!f.empty() && f.front() == ' ') f.remove_prefix(1);
  while (!f.empty() && (f.back() == ' ' || f.back() == '\0')) f.remove_suffix(1);
  uint64_t v = 0;
  for (char c : f) {
    if (c < '0' || c > '7' || (v >> 60)) return false;
    v = v * 8 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

bool Zero(const std::string& h) {
  return std::all_of(h.begin(), h.end(), [](char c) { return c == '\0'; });
}

bool ChecksumOk(const std::string& h) {
  uint64_t want;
  if (!Number(h, 148, 8, &want)) return false;
  uint64_t sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
  }
  return sum == want;
}

// The path as stored, with a leading "./" (and a directory's trailing '/') dropped; "" for
// the archive's root.
std::string Trim(absl::string_view path) {
  while (absl::StartsWith(path, "./")) path.remove_prefix(2);
  if (path == ".") path = "";
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  return std::string(path);
}

const char* TypeName(char type) {
  switch (type) {
    case '1':
      return "a hard link";
    case '3':
      return "a character device";
    case '4':
      return "a block device";
    case '6':
      return "a fifo";
    case 'S':
      return "a sparse file";
    case 'g':
      return "a pax global header";
    default:
      return nullptr;
  }
}

}  // namespace

absl::Status TarReader::Feed(absl::string_view piece, const TarSink& sink) {
  while (!piece.empty()) {
    switch (state_) {
      case State::kEnd:
        return absl::OkStatus();  // after the end: the archive's zero padding
      case State::kHeader: {
        const size_t take = std::min(piece.size(), kBlock - block_.size());
        block_.append(piece.data(), take);
        piece.remove_prefix(take);
        if (block_.size() == kBlock) {
          SANDGATE_RETURN_IF_ERROR(Header(sink));
          block_.clear();
        }
        break;
      }
      case State::kMeta:
      case State::kData: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(piece.size(), left_));
        if (state_ == State::kMeta) {
          meta_.append(piece.data(), take);
        } else {
          SANDGATE_RETURN_IF_ERROR(sink.data(piece.substr(0, take)));
        }
        piece.remove_prefix(take);
        left_ -= take;
        if (left_ == 0) {
          if (state_ == State::kMeta) {
            SANDGATE_RETURN_IF_ERROR(Meta());
          } else {
            SANDGATE_RETURN_IF_ERROR(sink.end());
          }
          left_ = padding_;
          state_ = left_ > 0 ? State::kPadding : State::kHeader;
        }
        break;
      }
      case State::kPadding: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(piece.size(), left_));
        piece.remove_prefix(take);
        left_ -= take;
        if (left_ == 0) state_ = State::kHeader;
        break;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status TarReader::Finish() const {
  if (state_ == State::kEnd || (state_ == State::kHeader && block_.empty())) {
    return absl::OkStatus();
  }
  return errors::InvalidArgument(
      absl::StrCat("snapshot archive: it ends inside ",
                   current_.empty() ? std::string("a header") : absl::StrCat("'", current_, "'")));
}

absl::Status TarReader::Header(const TarSink& sink) {
  if (Zero(block_)) {
    state_ = State::kEnd;
    return absl::OkStatus();
  }
  if (!ChecksumOk(block_)) {
    return errors::InvalidArgument(
        absl::StrCat("snapshot archive: ",
                     current_.empty() ? std::string("its first header")
                                      : absl::StrCat("the header after '", current_, "'"),
                     " has a wrong checksum (not a tar archive, or a damaged one)"));
  }
  const char type = block_[156];
  uint64_t size = 0;
  if (!Number(block_, 124, 12, &size)) {
    return errors::InvalidArgument("snapshot archive: a header's size is not a number");
  }
  if (type == 'x' || type == 'L' || type == 'K') {
    if (size > kMaxMeta) {
      return errors::InvalidArgument(absl::StrCat("snapshot archive: an extended header of ", size,
                                                  " bytes (at most ", kMaxMeta, ")"));
    }
    meta_type_ = type;
    meta_.clear();
    left_ = size;
    padding_ = (kBlock - size % kBlock) % kBlock;
    state_ = left_ > 0 ? State::kMeta : State::kHeader;
    return left_ > 0 ? absl::OkStatus() : Meta();
  }
  std::string name = std::string(Field(block_, 0, 100));
  if (Field(block_, 257, 5) == "ustar" && !Field(block_, 345, 155).empty()) {
    name = absl::StrCat(Field(block_, 345, 155), "/", name);
  }
  if (!next_path_.empty()) name = std::move(next_path_);
  std::string link = std::string(Field(block_, 157, 100));
  if (!next_link_.empty()) link = std::move(next_link_);
  if (have_next_size_) size = next_size_;
  next_path_.clear();
  next_link_.clear();
  have_next_size_ = false;
  current_ = name;

  TarEntry e;
  e.path = Trim(name);
  // How errors name the entry: as it would be restored ("./a" is "a").
  const std::string& shown = e.path.empty() ? name : e.path;
  if (type == '0' || type == '\0' || type == '7') {
    e.type = TarEntry::Type::kFile;
  } else if (type == '5') {
    e.type = TarEntry::Type::kDirectory;
  } else if (type == '2') {
    e.type = TarEntry::Type::kSymlink;
  } else if (const char* what = TypeName(type)) {
    return errors::InvalidArgument(
        absl::StrCat("snapshot archive: '", shown, "' is ", what,
                     "; a snapshot holds regular files, directories and symbolic links only"));
  } else {
    return errors::InvalidArgument(absl::StrCat(
        "snapshot archive: '", shown, "' has an unknown entry type '", std::string(1, type), "'"));
  }
  uint64_t mode = 0;
  if (!Number(block_, 100, 8, &mode)) {
    return errors::InvalidArgument(absl::StrCat("snapshot archive: '", name, "': mode"));
  }
  e.mode = static_cast<uint32_t>(mode & 0777);
  if (e.path.empty()) {
    if (e.type != TarEntry::Type::kDirectory) {
      return errors::InvalidArgument(absl::StrCat("snapshot archive: '", name, "': not a path"));
    }
    // The workspace itself: nothing to make.
    padding_ = 0;
    left_ = 0;
    return absl::OkStatus();
  }
  SANDGATE_RETURN_IF_ERROR(CheckPath(e.path, e.type));
  if (++entries_ > limits_.max_entries) {
    return errors::ResourceExhausted(absl::StrCat(
        "snapshots.max_entries: the archive holds more than ", limits_.max_entries, " entries"));
  }
  if (e.type == TarEntry::Type::kSymlink) {
    if (link.empty() || link.size() > kMaxPath) {
      return errors::InvalidArgument(absl::StrCat("snapshot archive: '", e.path,
                                                  "': a link target of ", link.size(),
                                                  " bytes (1 to ", kMaxPath, ")"));
    }
    e.link_target = std::move(link);
  }
  if (e.type == TarEntry::Type::kFile) {
    if (size > limits_.max_content_bytes - std::min(content_bytes_, limits_.max_content_bytes)) {
      return errors::ResourceExhausted(
          absl::StrCat("snapshots.max_bytes: the archive's files hold more than ",
                       limits_.max_content_bytes, " bytes (at '", e.path, "')"));
    }
    content_bytes_ += size;
    e.size = size;
  } else {
    size = 0;  // a directory or a link carries no data
  }
  SANDGATE_RETURN_IF_ERROR(sink.entry(e));
  left_ = size;
  padding_ = (kBlock - size % kBlock) % kBlock;
  if (size > 0) {
    state_ = State::kData;
    return absl::OkStatus();
  }
  return sink.end();
}

absl::Status TarReader::Meta() {
  if (meta_type_ == 'L' || meta_type_ == 'K') {
    std::string value = std::string(Field(meta_, 0, meta_.size()));
    (meta_type_ == 'L' ? next_path_ : next_link_) = std::move(value);
    return absl::OkStatus();
  }
  // pax: "<length> <key>=<value>\n" records.
  absl::string_view rest = meta_;
  while (!rest.empty()) {
    const size_t space = rest.find(' ');
    size_t len = 0;
    if (space == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, space), &len) ||
        len <= space + 1 || len > rest.size() || rest[len - 1] != '\n') {
      return errors::InvalidArgument("snapshot archive: a malformed pax header");
    }
    absl::string_view record = rest.substr(space + 1, len - space - 2);
    rest.remove_prefix(len);
    const size_t eq = record.find('=');
    if (eq == absl::string_view::npos) {
      return errors::InvalidArgument("snapshot archive: a malformed pax record");
    }
    absl::string_view key = record.substr(0, eq), value = record.substr(eq + 1);
    if (key == "path") {
      next_path_ = std::string(value);
    } else if (key == "linkpath") {
      next_link_ = std::string(value);
    } else if (key == "size") {
      if (!absl::SimpleAtoi(value, &next_size_)) {
        return errors::InvalidArgument("snapshot archive: a pax size is not a number");
      }
      have_next_size_ = true;
    } else if (absl::StartsWith(key, "GNU.sparse")) {
      return errors::InvalidArgument(
          "snapshot archive: a sparse file; a snapshot holds regular files, directories and "
          "symbolic links only");
    }
  }
  return absl::OkStatus();
}

absl::Status TarReader::CheckPath(const std::string& path, TarEntry::Type type) {
  auto bad = [&path](absl::string_view why) {
    return errors::InvalidArgument(absl::StrCat("snapshot archive: '", path, "': ", why));
  };
  if (path.size() > kMaxPath) return bad(absl::StrCat("longer than ", kMaxPath, " bytes"));
  if (path.front() == '/') return bad("an absolute path");
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/');
  std::string prefix;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].empty()) return bad("an empty path component");
    if (parts[i] == "." || parts[i] == "..") {
      return bad(absl::StrCat("a '", parts[i], "' component"));
    }
    if (parts[i].size() > 255) return bad("a component longer than 255 bytes");
    if (i + 1 == parts.size()) break;
    absl::StrAppend(&prefix, prefix.empty() ? "" : "/", parts[i]);
    if (symlinks_.contains(prefix)) {
      return bad(absl::StrCat("below '", prefix, "', a symbolic link of the archive"));
    }
  }
  if (named_.contains(path)) return bad("in the archive twice");
  if (type != TarEntry::Type::kDirectory && parents_.contains(path)) {
    return bad("not a directory, where the archive already placed something below it");
  }
  named_.insert(path);
  prefix.clear();
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    absl::StrAppend(&prefix, prefix.empty() ? "" : "/", parts[i]);
    parents_.insert(prefix);
  }
  if (type == TarEntry::Type::kSymlink) symlinks_.insert(path);
  return absl::OkStatus();
}

}  // namespace sandgate::core
