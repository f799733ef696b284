// TarBuilder: tar archives made by hand for tests, hostile ones included (absolute paths,
// "..", links, devices, setuid bits, wrong sizes), in ustar with GNU and pax extensions.
//
//   std::string tar = TarBuilder().Dir("d", 0700).File("d/a.txt", "hi", 04755).Finish();
#ifndef SANDGATE_TESTS_FAKES_TAR_BUILDER_H_
#define SANDGATE_TESTS_FAKES_TAR_BUILDER_H_

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace sandgate::testing {

class TarBuilder {
 public:
  TarBuilder& File(const std::string& path, const std::string& data, uint32_t mode = 0644) {
    return Entry('0', path, data, mode);
  }
  TarBuilder& Dir(const std::string& path, uint32_t mode = 0755) {
    return Entry('5', path, "", mode);
  }
  TarBuilder& Symlink(const std::string& path, const std::string& target) {
    return Entry('2', path, "", 0777, target);
  }
  TarBuilder& HardLink(const std::string& path, const std::string& target) {
    return Entry('1', path, "", 0644, target);
  }
  // A GNU long name ('L') for the next entry.
  TarBuilder& LongName(const std::string& name) { return Entry('L', "././@LongLink", name + '\0'); }
  // A pax extended header ('x') with one record.
  TarBuilder& Pax(const std::string& key, const std::string& value) {
    std::string record = absl::StrCat(" ", key, "=", value, "\n");
    size_t len = record.size() + 1;
    while (absl::StrCat(len).size() + record.size() != len) ++len;
    return Entry('x', "PaxHeader", absl::StrCat(len, record));
  }
  // Any entry; `data` follows it, padded to 512 bytes. `size` overrides the header's size.
  TarBuilder& Entry(char type, const std::string& path, const std::string& data,
                    uint32_t mode = 0644, const std::string& link = "", int64_t size = -1) {
    std::string h(512, '\0');
    std::memcpy(&h[0], path.data(), std::min<size_t>(path.size(), 100));
    Octal(&h, 100, 8, mode);
    Octal(&h, 108, 8, 1000);
    Octal(&h, 116, 8, 1000);
    Octal(&h, 124, 12, size >= 0 ? static_cast<uint64_t>(size) : data.size());
    Octal(&h, 136, 12, 0);
    h[156] = type;
    std::memcpy(&h[157], link.data(), std::min<size_t>(link.size(), 100));
    std::memcpy(&h[257],
                "ustar\0"
                "00",
                8);
    std::memset(&h[148], ' ', 8);
    uint64_t sum = 0;
    for (unsigned char c : h) sum += c;
    char chk[8];
    std::snprintf(chk, sizeof(chk), "%06llo", static_cast<unsigned long long>(sum));
    std::memcpy(&h[148], chk, 7);
    out_ += h;
    out_ += data;
    out_.append((512 - data.size() % 512) % 512, '\0');
    return *this;
  }
  // The archive with its end (two zero blocks).
  std::string Finish() const { return out_ + std::string(1024, '\0'); }
  // As it is so far, without an end.
  const std::string& bytes() const { return out_; }

 private:
  static void Octal(std::string* h, size_t at, size_t len, uint64_t v) {
    std::string digits(len - 1, '0');
    for (size_t i = len - 1; i-- > 0 && v > 0; v >>= 3)
      digits[i] = static_cast<char>('0' + (v & 7));
    std::memcpy(&(*h)[at], digits.data(), len - 1);
  }
  std::string out_;
};

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_FAKES_TAR_BUILDER_H_
