// The CUDA plugin (impl/device/cuda, libstarling_cuda.so) as the core loads it: dlopen,
// the table, init. Machines without a GPU or driver (CI) must get a clean failure with
// a message; with a GPU, init succeeds. Skipped when the plugin is not built
// (STARLING_WITH_CUDA=OFF or no nvcc). unit.cuda_plugin_exports checks the symbols.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>

#include "impl/device/plugin_abi.h"

namespace {

#ifdef STARLING_CUDA_PLUGIN_PATH

class CudaPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    // Loading touches no driver: this works on any machine.
    handle_ = dlopen(STARLING_CUDA_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    auto entry = reinterpret_cast<starling_device_plugin_entry_t>(dlsym(handle_, STARLING_DEVICE_PLUGIN_ENTRY));
    ASSERT_NE(entry, nullptr) << dlerror();
    plugin_ = entry();
    ASSERT_NE(plugin_, nullptr);
  }
  void TearDown() override {
    if (handle_ != nullptr) dlclose(handle_);
  }
  std::string Error() const { return plugin_->last_error(); }

  void* handle_ = nullptr;
  const starling_device_plugin_t* plugin_ = nullptr;
};

#define STARLING_PLUGIN_ENTRIES(X)                                                                          \
  X(last_error) X(init) X(describe) X(device_count) X(set_device) X(device_identity) X(pointer_kind)       \
  X(device_alloc) X(device_free) X(host_alloc) X(host_free) X(stream_create) X(stream_destroy)            \
  X(stream_synchronize) X(event_create) X(event_destroy) X(event_record) X(event_query)                   \
  X(event_synchronize) X(stream_wait_event) X(memcpy_async) X(reduce) X(divide) X(weighted_sum)           \
  X(convert) X(nccl_load) X(nccl_describe) X(nccl_unique_id) X(nccl_comm_init) X(nccl_comm_destroy)       \
  X(nccl_comm_abort) X(nccl_all_reduce) X(nccl_broadcast) X(nccl_all_gather) X(nccl_group_start)          \
  X(nccl_group_end) X(nccl_send) X(nccl_recv) X(nccl_comm_status) X(stream_is_capturing)           \
  X(nccl_reduce_scatter)

TEST_F(CudaPlugin, TableIsComplete) {
  EXPECT_EQ(plugin_->struct_size, sizeof(starling_device_plugin_t));
  EXPECT_EQ(plugin_->abi_version, STARLING_DEVICE_ABI_VERSION);
  int entries = 0;
#define STARLING_CHECK_ENTRY(name) \
  EXPECT_NE(plugin_->name, nullptr) << #name; \
  ++entries;
  STARLING_PLUGIN_ENTRIES(STARLING_CHECK_ENTRY)
#undef STARLING_CHECK_ENTRY
  // Every pointer of the struct is listed above.
  EXPECT_EQ(offsetof(starling_device_plugin_t, last_error) + entries * sizeof(void (*)()),
            sizeof(starling_device_plugin_t));
  ASSERT_NE(plugin_->last_error(), nullptr);
  ASSERT_NE(plugin_->describe(), nullptr);
  ASSERT_NE(plugin_->nccl_describe(), nullptr);
}

TEST_F(CudaPlugin, InitSucceedsOrNamesWhatIsMissing) {
  const int rc = plugin_->init();
  const std::string message = Error();
  std::printf("init: %d (%s); describe: %s\n", rc, rc != 0 ? message.c_str() : "ok", plugin_->describe());
  if (rc != 0) {
    EXPECT_FALSE(message.empty());
    EXPECT_TRUE(message.find("CUDA driver") != std::string::npos || message.find("CUDA device") != std::string::npos ||
                message.find("CUDA is not usable") != std::string::npos)
        << message;
    // Idempotent: the same answer again.
    EXPECT_NE(plugin_->init(), 0);
    EXPECT_EQ(Error(), message);
    // Without a device, calls fail cleanly and name the CUDA call.
    int count = -1;
    EXPECT_NE(plugin_->device_count(&count), 0);
    EXPECT_NE(Error().find("cudaGetDeviceCount: "), std::string::npos) << Error();
    char byte = 0;
    EXPECT_NE(plugin_->memcpy_async(&byte, &byte, 1, nullptr), 0);
    EXPECT_NE(Error().find("cudaMemcpyAsync: "), std::string::npos) << Error();
  } else {
    int count = 0;
    ASSERT_EQ(plugin_->device_count(&count), 0) << Error();
    EXPECT_GT(count, 0);
    char id[64];
    EXPECT_EQ(plugin_->device_identity(0, id, sizeof id), 0) << Error();
  }
  EXPECT_NE(std::string(plugin_->describe()).find("CUDA runtime "), std::string::npos) << plugin_->describe();
}

// Argument errors are caught before anything reaches CUDA; messages are per thread.
TEST_F(CudaPlugin, KernelArgumentErrors) {
  float a[2] = {1, 2};
  EXPECT_EQ(plugin_->reduce(a, a, 0, 2, 0, nullptr), 0);  // nothing to do, nothing launched
  EXPECT_NE(plugin_->reduce(a, a, 2, 42, 0, nullptr), 0);
  const std::string message = Error();
  EXPECT_NE(message.find("reduce: unsupported dtype"), std::string::npos) << message;
  EXPECT_NE(plugin_->divide(a, 2, 6, 2.0, nullptr), 0);
  EXPECT_NE(Error().find("divide: "), std::string::npos) << Error();
  const void* in[STARLING_DEVICE_MAX_INPUTS + 1] = {};
  double w[STARLING_DEVICE_MAX_INPUTS + 1] = {};
  EXPECT_NE(plugin_->weighted_sum(a, a, 1.0, in, w, STARLING_DEVICE_MAX_INPUTS + 1, 2, 2, nullptr), 0);
  EXPECT_NE(Error().find("weighted_sum: input count"), std::string::npos) << Error();
  EXPECT_NE(plugin_->convert(a, 3, a, 2, 2, nullptr), 0);
  EXPECT_NE(Error().find("convert: unsupported conversion"), std::string::npos) << Error();
  std::string other;
  std::thread([&] { other = plugin_->last_error(); }).join();
  EXPECT_EQ(other, "no error");
}

TEST_F(CudaPlugin, NcclLoadsOrNamesTheLibrary) {
  std::printf("before nccl_load: %s\n", plugin_->nccl_describe());
  const int rc = plugin_->nccl_load();
  if (rc != 0) {
    EXPECT_NE(Error().find("libnccl.so.2"), std::string::npos) << Error();
    EXPECT_NE(plugin_->nccl_group_start(), 0);
    EXPECT_NE(Error().find("NCCL is not loaded"), std::string::npos) << Error();
    std::printf("nccl_load failed: %s\n", Error().c_str());
    return;
  }
  const std::string description = plugin_->nccl_describe();
  std::printf("nccl_load: %s\n", description.c_str());
  EXPECT_EQ(description.rfind("NCCL 2.", 0), 0u) << description;
  EXPECT_EQ(plugin_->nccl_load(), 0);  // idempotent
  // Types NCCL lacks fail before reaching it.
  EXPECT_NE(plugin_->nccl_all_reduce(nullptr, nullptr, 1, 5, 0, nullptr, nullptr), 0);
  EXPECT_NE(Error().find("int16"), std::string::npos) << Error();
  EXPECT_NE(plugin_->nccl_all_reduce(nullptr, nullptr, 1, 2, 1, nullptr, nullptr), 0);
  EXPECT_NE(Error().find("AVERAGE"), std::string::npos) << Error();
}

#else

TEST(CudaPlugin, NotBuilt) { GTEST_SKIP() << "libstarling_cuda.so is not built (STARLING_WITH_CUDA)"; }

#endif

}  // namespace
