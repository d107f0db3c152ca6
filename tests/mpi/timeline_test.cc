// Run with STARLING_TIMELINE=<prefix>: every rank's timeline file must be valid JSON
// (checked with Python's json module) holding its operations and user activities,
// with balanced spans.
#include <mpi.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "test_util.h"

namespace starling_test {
namespace {

TEST(Timeline, RecordsOperationsAndActivitiesAsValidJson) {
  const char* prefix = std::getenv("STARLING_TIMELINE");
  ASSERT_NE(prefix, nullptr) << "run with STARLING_TIMELINE set";
  starling_context_t ctx;
  ASSERT_OK(starling_context_create(nullptr, &ctx));
  int rank, size, enabled = 0;
  ASSERT_OK(starling_rank(ctx, &rank));
  ASSERT_OK(starling_size(ctx, &size));
  ASSERT_OK(starling_timeline_enabled(ctx, &enabled));
  EXPECT_EQ(enabled, 1);
  Buffer x(Kind::kF32, {100});
  ASSERT_OK(starling_timeline_start_activity(ctx, "step", "FORWARD \"quoted\""));
  ASSERT_OK(starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, "grad.w"));
  starling_request_t req;
  ASSERT_OK(starling_neighbor_allreduce_nonblocking(ctx, &x.t, &x.t, nullptr, &req));
  ASSERT_OK(starling_request_wait(req));
  ASSERT_OK(starling_request_free(req));
  ASSERT_OK(starling_timeline_end_activity(ctx, "step"));
  EXPECT_ERROR(starling_timeline_start_activity(ctx, nullptr, "x"), STARLING_ERR_INVALID_ARGUMENT, "name");
  // A second context in the same process writes its own file.
  starling_context_t second;
  ASSERT_OK(starling_context_create(nullptr, &second));
  ASSERT_OK(starling_barrier(second));
  ASSERT_OK(starling_context_destroy(second));
  ASSERT_OK(starling_context_destroy(ctx));
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(std::ifstream(std::string(prefix) + std::to_string(rank) + ".1.json").good());
  if (rank != 0) return;
  for (int r = 0; r < size; ++r) {
    const std::string path = std::string(prefix) + std::to_string(r) + ".json";
    std::ifstream file(path);
    ASSERT_TRUE(file.good()) << path;
    std::stringstream text;
    text << file.rdbuf();
    const std::string json = text.str();
    EXPECT_NE(json.find("\"allreduce 'grad.w'\""), std::string::npos) << "lane of the named allreduce";
    EXPECT_NE(json.find("\"ENQUEUE\""), std::string::npos);
    EXPECT_NE(json.find("FORWARD \\\"quoted\\\""), std::string::npos) << "escaped activity name";
    const std::string check = "/usr/bin/python3 -c \"import json,collections,sys; e=json.load(open('" + path +
                              "')); c=collections.Counter((x.get('tid'),x['ph']) for x in e if x['ph'] in 'BE');"
                              " sys.exit(any(c[(t,'B')]!=c[(t,'E')] for t,_ in c))\"";
    EXPECT_EQ(std::system(check.c_str()), 0) << path << " is not valid JSON with balanced spans";
  }
}

}  // namespace
}  // namespace starling_test
