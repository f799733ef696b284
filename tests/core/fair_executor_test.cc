#include "core/fair_executor.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/common/eventually.h"

namespace sandgate::core {
namespace {

using sandgate::testing::Eventually;

// Tasks that say when they start and run until the test releases them, each by name.
class Tasks {
 public:
  std::function<void()> Blocking(const std::string& name) {
    std::shared_ptr<absl::Notification> release;
    {
      absl::MutexLock lock(&mu_);
      release = releases_[name] = std::make_shared<absl::Notification>();
    }
    return [this, name, release] {
      {
        absl::MutexLock lock(&mu_);
        started_.push_back(name);
      }
      release->WaitForNotification();
    };
  }
  void Release(const std::string& name) {
    absl::MutexLock lock(&mu_);
    releases_.at(name)->Notify();
  }
  void ReleaseAll() {
    absl::MutexLock lock(&mu_);
    for (auto& [name, n] : releases_) {
      if (!n->HasBeenNotified()) n->Notify();
    }
  }
  std::vector<std::string> started() {
    absl::MutexLock lock(&mu_);
    return started_;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<absl::Notification>> releases_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> started_ ABSL_GUARDED_BY(mu_);
};

// Issue 20 item 2: tenant A's long commands held every thread of the one pool and queued
// the rest; tenant B's `echo` waited for them.
TEST(FairExecutorTest, ATenantWithNothingRunningStartsAtOnceWhileAnotherHoldsEveryThread) {
  Tasks tasks;
  FairExecutor exec("exec", /*threads=*/2, /*max_queue_per_tenant=*/16);
  for (const char* name : {"a1", "a2", "a3", "a4"})
    ASSERT_TRUE(exec.Submit("a", tasks.Blocking(name)));
  // Admission is decided in Submit: a1 and a2 hold the pool, a3 and a4 wait.
  EXPECT_EQ(exec.running("a"), 2u);
  EXPECT_EQ(exec.waiting(), 2u);
  absl::Notification b_ran;
  ASSERT_TRUE(exec.Submit("b", [&b_ran] { b_ran.Notify(); }));
  EXPECT_EQ(exec.waiting(), 2u) << "b's task waits behind a's backlog";
  EXPECT_TRUE(b_ran.WaitForNotificationWithTimeout(absl::Seconds(30)))
      << "b's task did not run while a's held the pool";
  EXPECT_EQ(exec.running("a"), 2u) << "b ran without any of a's ending";
  tasks.ReleaseAll();
  exec.Shutdown();
  EXPECT_EQ(tasks.started().size(), 4u);
}

TEST(FairExecutorTest, AFreedThreadGoesToTheTenantWithFewerRunningBeforeTheBusyBacklog) {
  Tasks tasks;
  FairExecutor exec("exec", /*threads=*/4, /*max_queue_per_tenant=*/16);
  for (const char* name : {"a1", "a2", "a3", "a4", "a5", "a6"}) {
    ASSERT_TRUE(exec.Submit("a", tasks.Blocking(name)));
  }
  ASSERT_TRUE(exec.Submit("b", tasks.Blocking("b1")));  // b's first: at once, beyond the pool
  ASSERT_TRUE(exec.Submit("b", tasks.Blocking("b2")));  // b's second waits for room
  EXPECT_EQ(exec.running(), 5u);
  EXPECT_EQ(exec.waiting(), 3u);
  ASSERT_TRUE(Eventually("five tasks to start", [&] { return tasks.started().size() == 5; }));

  tasks.Release("a1");  // 4 run: the pool is still full
  ASSERT_TRUE(Eventually("a1 to end", [&] { return exec.running("a") == 3; }));
  EXPECT_EQ(exec.running(), 4u);
  EXPECT_EQ(exec.waiting(), 3u);
  tasks.Release(
      "a2");  // room for one: b (1 running) before a (2 running), whose tasks queued first
  ASSERT_TRUE(Eventually("a task to start", [&] { return tasks.started().size() == 6; }));
  EXPECT_EQ(tasks.started().back(), "b2");
  tasks.Release("a3");  // now a runs fewer (a4) than b (b1, b2)
  ASSERT_TRUE(Eventually("a task to start", [&] { return tasks.started().size() == 7; }));
  EXPECT_EQ(tasks.started().back(), "a5");
  tasks.ReleaseAll();
  exec.Shutdown();
  EXPECT_EQ(tasks.started().size(), 8u);
  EXPECT_EQ(exec.running(), 0u);
}

TEST(FairExecutorTest, OneTenantsFullQueueDoesNotRefuseAnother) {
  Tasks tasks;
  FairExecutor exec("exec", /*threads=*/1, /*max_queue_per_tenant=*/2);
  ASSERT_TRUE(exec.Submit("a", tasks.Blocking("a1")));
  ASSERT_TRUE(exec.Submit("a", tasks.Blocking("a2")));
  ASSERT_TRUE(exec.Submit("a", tasks.Blocking("a3")));
  EXPECT_FALSE(exec.Submit("a", tasks.Blocking("a4"))) << "a's queue holds two";
  ASSERT_TRUE(exec.Submit("b", tasks.Blocking("b1")));  // runs at once
  ASSERT_TRUE(exec.Submit("b", tasks.Blocking("b2")));
  ASSERT_TRUE(exec.Submit("b", tasks.Blocking("b3")));
  EXPECT_FALSE(exec.Submit("b", tasks.Blocking("b4")));
  tasks.ReleaseAll();
  exec.Shutdown();
  EXPECT_EQ(tasks.started().size(), 6u) << "Shutdown runs what was queued";
  EXPECT_FALSE(exec.Submit("a", [] {}));
}

}  // namespace
}  // namespace sandgate::core
