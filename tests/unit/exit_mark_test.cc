// Exit marks (impl/common/exit_mark.h): how starlingrun --fault-tolerant tells a rank
// that exited, and with which status, from one that was killed.
#include "impl/common/exit_mark.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/unit/child_process.h"

namespace starling {
namespace {

class ExitMark : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/starling-exit-marks.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // Runs `end` in a child that armed its mark; returns the mark's text, or "none".
  std::string MarkOfChild(void (*end)()) {
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("STARLING_EXIT_MARKS", dir_.c_str(), 1);
      ArmExitMark();
      ArmExitMark();  // once per process, however often it is called
      end();
      _exit(99);
    }
    testing::Reap(pid);
    std::ifstream in(dir_ + "/" + std::to_string(pid));
    if (!in) return "none";
    std::string text;
    std::getline(in, text);
    return text;
  }
  std::string dir_;
};

TEST_F(ExitMark, HoldsTheExitStatus) {
  EXPECT_EQ(MarkOfChild([] { std::exit(0); }), "0");
  EXPECT_EQ(MarkOfChild([] { std::exit(3); }), "3");
}

TEST_F(ExitMark, NoneForAKilledProcessOrOneThatSkipsExitHandlers) {
  EXPECT_EQ(MarkOfChild([] { raise(SIGKILL); }), "none");
  EXPECT_EQ(MarkOfChild([] { _exit(0); }), "none");
}

}  // namespace
}  // namespace starling
