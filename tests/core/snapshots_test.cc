// PageOfSnapshots (core/snapshots.h): ListSnapshots' pages over a tenant's listing, newest
// first. Every page of a walk is the listing's next slice, whatever is taken or deleted
// meanwhile; page_size 0 is every snapshot; bad sizes and tokens are refused by name.
#include "core/snapshots.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace sandgate::core {
namespace {

// A snapshot taken at second `t`.
v1::Snapshot At(int t) {
  v1::Snapshot s;
  s.set_id(absl::StrCat("snap-", std::string(30, '0'), t < 10 ? "0" : "", t));
  s.mutable_created_at()->set_seconds(1800000000 + t);
  return s;
}

// Newest first: taken at seconds n-1 … 0.
std::vector<v1::Snapshot> Listing(int n) {
  std::vector<v1::Snapshot> all;
  for (int t = n - 1; t >= 0; --t) all.push_back(At(t));
  return all;
}

std::vector<std::string> Ids(const std::vector<v1::Snapshot>& list) {
  std::vector<std::string> ids;
  for (const v1::Snapshot& s : list) ids.push_back(s.id());
  return ids;
}

TEST(PageOfSnapshotsTest, SizeZeroIsEverySnapshotAsBeforePaging) {
  absl::StatusOr<SnapshotPage> page = PageOfSnapshots(Listing(7), 0, "");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(Ids(page->snapshots), Ids(Listing(7)));
  EXPECT_EQ(page->next_page_token, "");
}

TEST(PageOfSnapshotsTest, AWalkOfPagesIsTheListingInOrderAndEndsWithNoToken) {
  std::vector<std::string> walked;
  std::string token;
  int pages = 0;
  do {
    absl::StatusOr<SnapshotPage> page = PageOfSnapshots(Listing(5), 2, token);
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_LE(page->snapshots.size(), 2u);
    for (const std::string& id : Ids(page->snapshots)) walked.push_back(id);
    token = page->next_page_token;
    ASSERT_LT(++pages, 10);
  } while (!token.empty());
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(walked, Ids(Listing(5)));
  // An exact fit ends without an empty last page.
  absl::StatusOr<SnapshotPage> whole = PageOfSnapshots(Listing(4), 4, "");
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->next_page_token, "");
  EXPECT_TRUE(PageOfSnapshots({}, 3, "")->snapshots.empty());
}

TEST(PageOfSnapshotsTest, SnapshotsTakenOrDeletedMeanwhileNeitherRepeatNorSkip) {
  absl::StatusOr<SnapshotPage> first = PageOfSnapshots(Listing(6), 2, "");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(Ids(first->snapshots), (std::vector<std::string>{At(5).id(), At(4).id()}));
  // A newer one taken since: the next page goes on after the cursor, not from the top.
  std::vector<v1::Snapshot> grown = Listing(6);
  grown.insert(grown.begin(), At(9));
  absl::StatusOr<SnapshotPage> second = PageOfSnapshots(grown, 2, first->next_page_token);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(Ids(second->snapshots), (std::vector<std::string>{At(3).id(), At(2).id()}));
  // The cursor's own snapshot deleted since: on from its time.
  std::vector<v1::Snapshot> shrunk = Listing(6);
  shrunk.erase(shrunk.begin() + 3);  // At(2), the second page's last
  absl::StatusOr<SnapshotPage> third = PageOfSnapshots(shrunk, 2, second->next_page_token);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(Ids(third->snapshots), (std::vector<std::string>{At(1).id(), At(0).id()}));
  EXPECT_EQ(third->next_page_token, "");
}

TEST(PageOfSnapshotsTest, BadSizesAndTokensAreRefusedNamingTheField) {
  absl::StatusOr<SnapshotPage> big = PageOfSnapshots(Listing(3), 501, "");
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(big.status().message(), "page_size: at most 500, got 501"))
      << big.status();
  EXPECT_TRUE(PageOfSnapshots(Listing(3), 500, "").ok());
  const std::string oversize(100000, '7');
  for (const std::string& token :
       {std::string("garbage"), std::string("12."),
        std::string(".snap-00000000000000000000000000000001"),
        std::string("-5.snap-00000000000000000000000000000001"), std::string("1.snap\xff\xfe"),
        std::string("1.snap 1"), std::string("1.../../etc/passwd"),
        std::string("99999999999999999999999.snap-1"), std::string("1.snap-1\0x", 10), oversize}) {
    absl::StatusOr<SnapshotPage> page = PageOfSnapshots(Listing(3), 2, token);
    ASSERT_EQ(page.status().code(), absl::StatusCode::kInvalidArgument) << token.substr(0, 40);
    const std::string says(page.status().message());
    EXPECT_TRUE(absl::StartsWith(says, "page_token: not a token from ListSnapshots: '")) << says;
    EXPECT_LT(says.size(), 200u) << "an oversize token is not echoed whole";
  }
}

TEST(PageOfSnapshotsTest, AnotherListingsCursorShowsOnlyThisListing) {
  // A token of another tenant's snapshot: its id is not in this listing, so the walk goes on
  // from its time, over this listing's own snapshots only.
  const std::string foreign = absl::StrCat(At(3).created_at().seconds() * 1000000000, ".",
                                           "snap-ffffffffffffffffffffffffffffffff");
  absl::StatusOr<SnapshotPage> page = PageOfSnapshots(Listing(6), 10, foreign);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(Ids(page->snapshots), (std::vector<std::string>{At(2).id(), At(1).id(), At(0).id()}));
}

}  // namespace
}  // namespace sandgate::core
