#!/usr/bin/env python3
"""Tests of thread_safety.py on a tiny tree of its own: two units with the same flags (so they
share a precompiled header) and one whose guarded member is touched without its mutex. The
check must pass the clean pair through the shared header and fail the bad unit, naming it, with
the header and without it.

    thread_safety_test.py     (needs clang++ and Abseil's headers, as the check itself does)
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "thread_safety.py")

CLEAN = """#include <string>
#include "absl/synchronization/mutex.h"
#include "common/counter.h"
int Counter::Add() {
  absl::MutexLock l(&mu_);
  return ++n_;
}
"""
ALSO_CLEAN = """#include <vector>
#include "absl/synchronization/mutex.h"
#include "common/counter.h"
int Read(Counter& c) { return c.Add(); }
"""
BAD = """#include "absl/synchronization/mutex.h"
#include "common/counter.h"
int Counter::Peek() { return n_; }  // reads n_ without mu_
"""
HEADER = """#pragma once
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
class Counter {
 public:
  int Add();
  int Peek();
 private:
  absl::Mutex mu_;
  int n_ ABSL_GUARDED_BY(mu_) = 0;
};
"""


class ThreadSafetyTest(unittest.TestCase):
    def tree(self, units):
        root = tempfile.mkdtemp(prefix="thread-safety-test-")
        self.addCleanup(subprocess.run, ["rm", "-rf", root])
        src, build = os.path.join(root, "src"), os.path.join(root, "build")
        os.makedirs(os.path.join(src, "daemon", "common"))
        os.makedirs(build)
        with open(os.path.join(src, "daemon", "common", "counter.h"), "w") as f:
            f.write(HEADER)
        entries = []
        for name, text in units.items():
            path = os.path.join(src, "daemon", "common", name)
            with open(path, "w") as f:
                f.write(text)
            entries.append({"directory": build, "file": path,
                            "command": f"/usr/bin/c++ -I{src}/daemon -std=c++17 -Wall -Wextra "
                                       f"-Werror -o {name}.o -c {path}"})
        with open(os.path.join(build, "compile_commands.json"), "w") as f:
            json.dump(entries, f)
        return build, src

    def check(self, units, pch="1"):
        build, src = self.tree(units)
        env = dict(os.environ, SANDGATE_THREAD_SAFETY_PCH=pch)
        return subprocess.run([sys.executable, SCRIPT, build, src], capture_output=True,
                              text=True, env=env)

    def test_units_with_the_same_flags_share_a_header_and_pass(self):
        r = self.check({"a.cc": CLEAN, "b.cc": ALSO_CLEAN})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("2 units pass", r.stdout)
        self.assertIn("2 with a shared precompiled header", r.stdout)

    def test_a_guarded_member_read_without_its_mutex_fails_with_the_header(self):
        r = self.check({"a.cc": CLEAN, "bad.cc": BAD})
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("1 of 2 units fail", r.stdout)
        self.assertIn("daemon/common/bad.cc", r.stdout)
        self.assertIn("requires holding mutex 'mu_'", r.stdout)

    def test_and_without_it(self):
        r = self.check({"a.cc": CLEAN, "bad.cc": BAD}, pch="0")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("daemon/common/bad.cc", r.stdout)
        self.assertNotIn("precompiled", r.stdout)


if __name__ == "__main__":
    unittest.main()
