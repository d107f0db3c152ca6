// Run with STARLING_TIMEOUT_SECONDS=1.5, STARLING_STALL_WARNING_SECONDS=0.5 and
// STARLING_LOG_LEVEL=warn at 2 ranks: a rank that never shows up turns into a
// TIMEOUT error naming it (after a stall warning), the context then refuses further
// work instead of hanging, and destroying it still works.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "test_util.h"

namespace starling_test {
namespace {

std::string CaptureStderr(const std::function<void()>& body) {
  char path[] = "/tmp/starling_stderr_XXXXXX";
  const int fd = mkstemp(path);
  const int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  body();
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fd);
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  unlink(path);
  return text.str();
}

TEST(Timeout, AbsentPeerBecomesAnErrorNotAHang) {
  starling_context_t ctx;
  ASSERT_OK(starling_context_create(nullptr, &ctx));
  int rank;
  ASSERT_OK(starling_rank(ctx, &rank));
  Buffer x(Kind::kF32, {4});
  if (rank == 0) {
    starling_status_t status = STARLING_SUCCESS;
    std::string message;
    const auto start = std::chrono::steady_clock::now();
    const std::string log = CaptureStderr([&] {
      status = starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, "lonely");
      message = starling_last_error();
    });
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(status, STARLING_ERR_TIMEOUT);
    EXPECT_NE(message.find("allreduce 'lonely'"), std::string::npos) << message;
    EXPECT_NE(message.find("rank(s) 1"), std::string::npos) << message;
    EXPECT_GT(took, 1.4);
    EXPECT_LT(took, 5.0);
    EXPECT_NE(log.find("[starling][rank 0] W"), std::string::npos) << log;
    EXPECT_NE(log.find("has waited"), std::string::npos) << log;
    // The context is now unusable and says so immediately.
    EXPECT_ERROR(starling_barrier(ctx), STARLING_ERR_TRANSPORT, "unusable");
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(3));  // never calls the allreduce
  }
  EXPECT_OK(starling_context_destroy(ctx));
}

}  // namespace
}  // namespace starling_test
