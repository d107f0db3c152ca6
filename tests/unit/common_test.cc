// impl/common: configuration parsing, dtype mapping, DLPack validation, handles.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "capi/private/handles.h"
#include "impl/common/config.h"
#include "impl/common/dtype.h"
#include "impl/common/error.h"
#include "impl/common/tensor.h"

namespace starling {
namespace {

Config Parse(const std::map<std::string, std::string>& env) {
  return ParseConfig([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string ParseError(const std::map<std::string, std::string>& env) {
  try {
    Parse(env);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(Config, DefaultsWhenUnset) {
  const Config c = Parse({});
  EXPECT_EQ(c.log_level, LogLevel::kOff);
  EXPECT_EQ(c.stall_warning_seconds, 60.0);
  EXPECT_EQ(c.timeout_seconds, 0.0);
  EXPECT_EQ(c.fusion_threshold, 8u << 20);
  EXPECT_EQ(c.nodes_per_machine, 0);
  EXPECT_EQ(c.chunk_bytes, 1u << 20);
  EXPECT_TRUE(c.timeline_prefix.empty());
  EXPECT_EQ(c.peer_check_seconds, 0.5);
}

TEST(Config, PeerCheckSeconds) {
  EXPECT_EQ(Parse({{"STARLING_PEER_CHECK_SECONDS", "2"}}).peer_check_seconds, 2.0);
  EXPECT_EQ(Parse({{"STARLING_PEER_CHECK_SECONDS", "0"}}).peer_check_seconds, 0.0);
  EXPECT_EQ(Parse({}).mismatch_check_seconds, 1.0);
  EXPECT_EQ(Parse({{"STARLING_MISMATCH_CHECK_SECONDS", "0.2"}}).mismatch_check_seconds, 0.2);
  EXPECT_NE(ParseError({{"STARLING_MISMATCH_CHECK_SECONDS", "soon"}}).find("STARLING_MISMATCH_CHECK_SECONDS"),
            std::string::npos);
  EXPECT_EQ(Parse({}).ft_detector_seconds, 0.0);
  EXPECT_EQ(Parse({{"STARLING_FT_DETECTOR_SECONDS", "1.5"}}).ft_detector_seconds, 1.5);
  EXPECT_NE(ParseError({{"STARLING_FT_DETECTOR_SECONDS", "soon"}}).find("STARLING_FT_DETECTOR_SECONDS"),
            std::string::npos);
  EXPECT_NE(ParseError({{"STARLING_PEER_CHECK_SECONDS", "-1"}}).find("STARLING_PEER_CHECK_SECONDS"),
            std::string::npos);
}

TEST(Config, HeartbeatSeconds) {
  EXPECT_EQ(Parse({}).heartbeat_seconds, 0.5);
  EXPECT_EQ(Parse({{"STARLING_HEARTBEAT_SECONDS", "2"}}).heartbeat_seconds, 2.0);
  EXPECT_EQ(Parse({{"STARLING_HEARTBEAT_SECONDS", "0"}}).heartbeat_seconds, 0.0);
  // Below 50 ms a busy machine's scheduling delays alone would look like deaths.
  EXPECT_NE(ParseError({{"STARLING_HEARTBEAT_SECONDS", "0.01"}}).find("is below 0.05"), std::string::npos);
  EXPECT_NE(ParseError({{"STARLING_HEARTBEAT_SECONDS", "-1"}}).find("STARLING_HEARTBEAT_SECONDS"), std::string::npos);
}

TEST(Config, ParsesValues) {
  const Config c = Parse({{"STARLING_LOG_LEVEL", "Debug"},
                          {"STARLING_TIMEOUT_SECONDS", "2.5"},
                          {"STARLING_FUSION_THRESHOLD", "1048576"},
                          {"STARLING_NODES_PER_MACHINE", "2"},
                          {"STARLING_TIMELINE", "/tmp/tl"},
                          {"STARLING_CHUNK_BYTES", "65536"}});
  EXPECT_EQ(c.log_level, LogLevel::kDebug);
  EXPECT_EQ(c.timeout_seconds, 2.5);
  EXPECT_EQ(c.fusion_threshold, 1048576u);
  EXPECT_EQ(c.nodes_per_machine, 2);
  EXPECT_EQ(c.timeline_prefix, "/tmp/tl");
  EXPECT_EQ(c.chunk_bytes, 65536u);
  const Config shm = Parse({{"STARLING_SHM_BUFFER_BYTES", "0"}, {"STARLING_SHM_MIN_BYTES", "4096"}});
  EXPECT_EQ(shm.shm_buffer_bytes, 0u);
  EXPECT_EQ(shm.shm_min_bytes, 4096u);
  EXPECT_EQ(Parse({}).shm_buffer_bytes, size_t{256} << 20);
  EXPECT_EQ(Parse({}).shm_min_bytes, 0u);
}

TEST(Config, BlueFogAliasesApplyAndStarlingNamesWin) {
  EXPECT_EQ(Parse({{"BLUEFOG_LOG_LEVEL", "warning"}}).log_level, LogLevel::kWarn);
  EXPECT_EQ(Parse({{"BLUEFOG_FUSION_THRESHOLD", "1024"}}).fusion_threshold, 1024u);
  EXPECT_EQ(Parse({{"BLUEFOG_NODES_PER_MACHINE", "4"}}).nodes_per_machine, 4);
  EXPECT_EQ(Parse({{"BLUEFOG_TIMELINE", "tl"}}).timeline_prefix, "tl");
  EXPECT_EQ(Parse({{"BLUEFOG_LOG_LEVEL", "debug"}, {"STARLING_LOG_LEVEL", "error"}}).log_level, LogLevel::kError);
}

TEST(Config, RejectsBadValuesNamingTheVariable) {
  EXPECT_NE(ParseError({{"STARLING_LOG_LEVEL", "loud"}}).find("STARLING_LOG_LEVEL='loud'"), std::string::npos);
  EXPECT_NE(ParseError({{"BLUEFOG_LOG_LEVEL", "loud"}}).find("BLUEFOG_LOG_LEVEL"), std::string::npos);
  EXPECT_NE(ParseError({{"STARLING_TIMEOUT_SECONDS", "-1"}}).find("STARLING_TIMEOUT_SECONDS"), std::string::npos);
  EXPECT_NE(ParseError({{"STARLING_TIMEOUT_SECONDS", "3x"}}).find("not a number"), std::string::npos);
  EXPECT_NE(ParseError({{"STARLING_FUSION_THRESHOLD", "1.5"}}).find("whole number"), std::string::npos);
  EXPECT_NE(ParseError({{"STARLING_CHUNK_BYTES", "100"}}).find("STARLING_CHUNK_BYTES"), std::string::npos);
  EXPECT_NE(ParseError({{"STARLING_NODES_PER_MACHINE", "two"}}).find("STARLING_NODES_PER_MACHINE"),
            std::string::npos);
  EXPECT_NE(ParseError({{"STARLING_STALL_WARNING_SECONDS", "nan"}}).find("STARLING_STALL_WARNING_SECONDS"),
            std::string::npos);
  EXPECT_NE(ParseError({{"STARLING_SHM_BUFFER_BYTES", "2e12"}}).find("exceeds 1 TiB"), std::string::npos);
  EXPECT_NE(ParseError({{"STARLING_SHM_MIN_BYTES", "-1"}}).find("STARLING_SHM_MIN_BYTES"), std::string::npos);
  EXPECT_NE(ParseError({{"STARLING_SHM_COPY", "fast"}}).find("not one of auto, plain, stream"), std::string::npos);
}

TEST(Config, DescribeListsEveryVariableWithValueInEffect) {
  const std::string text = DescribeConfig([](const char* name) -> const char* {
    return std::string(name) == "BLUEFOG_FUSION_THRESHOLD" ? "4096" : nullptr;
  });
  for (const ConfigVar& var : ConfigTable()) EXPECT_NE(text.find(var.name), std::string::npos) << var.name;
  EXPECT_NE(text.find("STARLING_FUSION_THRESHOLD=4096 (from BLUEFOG_FUSION_THRESHOLD)"), std::string::npos);
}

TEST(DType, MapsEverySupportedDLPackType) {
  struct Case { DLDataType dl; DType dtype; size_t size; const char* name; };
  const Case cases[] = {
      {{kDLFloat, 16, 1}, DType::kFloat16, 2, "float16"},  {{kDLBfloat, 16, 1}, DType::kBFloat16, 2, "bfloat16"},
      {{kDLFloat, 32, 1}, DType::kFloat32, 4, "float32"},  {{kDLFloat, 64, 1}, DType::kFloat64, 8, "float64"},
      {{kDLInt, 8, 1}, DType::kInt8, 1, "int8"},           {{kDLInt, 16, 1}, DType::kInt16, 2, "int16"},
      {{kDLInt, 32, 1}, DType::kInt32, 4, "int32"},        {{kDLInt, 64, 1}, DType::kInt64, 8, "int64"},
      {{kDLUInt, 8, 1}, DType::kUInt8, 1, "uint8"},
  };
  for (const Case& c : cases) {
    auto d = FromDLDataType(c.dl);
    ASSERT_TRUE(d.has_value()) << c.name;
    EXPECT_EQ(*d, c.dtype);
    EXPECT_EQ(DTypeSize(*d), c.size);
    EXPECT_STREQ(DTypeName(*d), c.name);
    const DLDataType back = ToDLDataType(*d);
    EXPECT_EQ(back.code, c.dl.code);
    EXPECT_EQ(back.bits, c.dl.bits);
    EXPECT_EQ(back.lanes, 1);
  }
}

TEST(DType, RejectsUnsupportedTypes) {
  EXPECT_FALSE(FromDLDataType({kDLFloat, 32, 4}).has_value());  // vector lanes
  EXPECT_FALSE(FromDLDataType({kDLComplex, 64, 1}).has_value());
  EXPECT_FALSE(FromDLDataType({kDLUInt, 16, 1}).has_value());
  EXPECT_FALSE(FromDLDataType({kDLUInt, 1, 1}).has_value());     // bool
  EXPECT_FALSE(FromDLDataType({kDLFloat, 8, 1}).has_value());
  EXPECT_FALSE(FromDLDataType({kDLBfloat, 32, 1}).has_value());
  char buffer[48];
  EXPECT_STREQ(DescribeDLDataType({kDLFloat, 32, 4}, buffer, sizeof buffer), "float32x4");
  EXPECT_STREQ(DescribeDLDataType({kDLComplex, 64, 1}, buffer, sizeof buffer), "complex64");
  // DLPack 1.0's kDLBool (code 6; NumPy 2, PyTorch 2): refused, and named.
  EXPECT_FALSE(FromDLDataType({kDLPackBoolCode, 8, 1}).has_value());
  EXPECT_STREQ(DescribeDLDataType({kDLPackBoolCode, 8, 1}, buffer, sizeof buffer), "bool");
  // DLPack 1.1's float8 codes (PyTorch 2's float8_e4m3fn and float8_e5m2): named.
  EXPECT_FALSE(FromDLDataType({10, 8, 1}).has_value());
  EXPECT_STREQ(DescribeDLDataType({10, 8, 1}, buffer, sizeof buffer), "float8_e4m3fn");
  EXPECT_STREQ(DescribeDLDataType({12, 8, 1}, buffer, sizeof buffer), "float8_e5m2");
  EXPECT_STREQ(DescribeDLDataType({18, 8, 1}, buffer, sizeof buffer), "code18bits8");
}

// A DLTensor over caller-provided storage.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLTensor t{};
  Tensor(void* data, DLDataType dtype, std::vector<int64_t> s, std::vector<int64_t> st = {})
      : shape(std::move(s)), strides(std::move(st)) {
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = dtype;
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
    t.byte_offset = 0;
  }
};

std::string ViewError(const DLTensor* t, Code expected) {
  try {
    ViewOf(t, "in");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), expected) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "ViewOf accepted a bad tensor";
  return "";
}

TEST(Tensor, AcceptsContiguousTensors) {
  alignas(8) float data[24] = {};
  Tensor a(data, {kDLFloat, 32, 1}, {2, 3, 4});
  TensorView v = ViewOf(&a.t, "in");
  EXPECT_EQ(v.numel, 24u);
  EXPECT_EQ(v.bytes, 96u);
  EXPECT_EQ(v.row_bytes(), 48u);
  EXPECT_EQ(v.Describe(), "float32[2, 3, 4]");
  Tensor b(data, {kDLFloat, 32, 1}, {2, 3, 4}, {12, 4, 1});  // explicit compact strides
  EXPECT_EQ(ViewOf(&b.t, "in").numel, 24u);
  Tensor c(data, {kDLFloat, 32, 1}, {2, 1, 12}, {12, 99, 1});  // extent-1 dims may carry any stride
  EXPECT_EQ(ViewOf(&c.t, "in").numel, 24u);
  Tensor scalar(data, {kDLFloat, 32, 1}, {});
  EXPECT_EQ(ViewOf(&scalar.t, "in").numel, 1u);
  Tensor empty(nullptr, {kDLFloat, 32, 1}, {0, 5});
  EXPECT_EQ(ViewOf(&empty.t, "in").bytes, 0u);
  Tensor offset(data, {kDLFloat, 32, 1}, {4});
  offset.t.byte_offset = 8;
  EXPECT_EQ(ViewOf(&offset.t, "in").data, static_cast<void*>(data + 2));
}

TEST(Tensor, RejectsBadTensorsWithClearMessages) {
  alignas(8) float data[24] = {};
  EXPECT_NE(ViewError(nullptr, Code::kInvalidArgument).find("in must not be NULL"), std::string::npos);

  Tensor transposed(data, {kDLFloat, 32, 1}, {4, 6}, {1, 4});
  EXPECT_NE(ViewError(&transposed.t, Code::kInvalidArgument).find("not contiguous"), std::string::npos);

  Tensor misaligned(data, {kDLFloat, 32, 1}, {4});
  misaligned.t.byte_offset = 2;
  EXPECT_NE(ViewError(&misaligned.t, Code::kInvalidArgument).find("misaligned"), std::string::npos);

  Tensor rocm(data, {kDLFloat, 32, 1}, {4});
  rocm.t.device = {kDLROCM, 1};
  EXPECT_NE(ViewError(&rocm.t, Code::kUnsupported).find("rocm:1"), std::string::npos);
  // CUDA memory is accepted here and marked; impl/device checks the pointer itself.
  Tensor gpu(data, {kDLFloat, 32, 1}, {4});
  gpu.t.device = {kDLCUDA, 1};
  EXPECT_EQ(ViewOf(&gpu.t, "gpu").device, 1);
  gpu.t.device = {kDLCUDAManaged, 0};
  EXPECT_EQ(ViewOf(&gpu.t, "gpu").device, 0);
  gpu.t.device = {kDLCUDAHost, 0};
  EXPECT_EQ(ViewOf(&gpu.t, "gpu").device, -1);
  gpu.t.device = {kDLCUDA, -2};
  EXPECT_NE(ViewError(&gpu.t, Code::kInvalidArgument).find("negative CUDA device"), std::string::npos);

  Tensor hexagon(data, {kDLFloat, 32, 1}, {4});  // DLPack 1.x's kDLHexagon, beyond this header's enum
  const int32_t hexagon_type = 16;
  std::memcpy(&hexagon.t.device.device_type, &hexagon_type, sizeof hexagon_type);
  EXPECT_NE(ViewError(&hexagon.t, Code::kUnsupported).find("device unknown:0"), std::string::npos);

  Tensor complex(data, {kDLComplex, 64, 1}, {4});
  EXPECT_NE(ViewError(&complex.t, Code::kUnsupported).find("complex64"), std::string::npos);

  Tensor negative(data, {kDLFloat, 32, 1}, {4, -1});
  EXPECT_NE(ViewError(&negative.t, Code::kInvalidArgument).find("negative dimension"), std::string::npos);

  Tensor null_data(nullptr, {kDLFloat, 32, 1}, {4});
  EXPECT_NE(ViewError(&null_data.t, Code::kInvalidArgument).find("NULL data"), std::string::npos);

  Tensor null_shape(data, {kDLFloat, 32, 1}, {4});
  null_shape.t.shape = nullptr;
  EXPECT_NE(ViewError(&null_shape.t, Code::kInvalidArgument).find("NULL shape"), std::string::npos);

  Tensor huge(data, {kDLFloat, 64, 1}, {int64_t{1} << 40, int64_t{1} << 40});
  EXPECT_NE(ViewError(&huge.t, Code::kInvalidArgument).find("overflows"), std::string::npos);

  Tensor bad_ndim(data, {kDLFloat, 32, 1}, {4});
  bad_ndim.t.ndim = -3;
  EXPECT_NE(ViewError(&bad_ndim.t, Code::kInvalidArgument).find("ndim"), std::string::npos);
}

// Sizes derived from a descriptor are checked for overflow before anything uses them.
TEST(Tensor, RejectsDescriptorsWhoseSizesOverflow) {
  alignas(8) float data[8] = {};
  const int64_t two61 = int64_t{1} << 61;
  Tensor big(data, {kDLFloat, 32, 1}, {two61});  // 2^63 bytes: one past the limit
  EXPECT_NE(ViewError(&big.t, Code::kInvalidArgument)
                .find("in: shape [2305843009213693952] of float32 has a byte size that overflows"),
            std::string::npos);
  Tensor wraps(data, {kDLFloat, 64, 1}, {int64_t{1} << 32, int64_t{1} << 32});  // 2^67 bytes wraps to 0
  EXPECT_NE(ViewError(&wraps.t, Code::kInvalidArgument).find("has a byte size that overflows"), std::string::npos);
  Tensor max_dims(data, {kDLUInt, 8, 1}, {INT64_MAX, INT64_MAX});
  EXPECT_NE(ViewError(&max_dims.t, Code::kInvalidArgument).find("overflows"), std::string::npos);
  // A zero dimension makes a tensor empty, but its other dimensions still feed row sizes.
  Tensor empty_but_huge(nullptr, {kDLInt, 16, 1}, {0, INT64_MAX});
  EXPECT_NE(ViewError(&empty_but_huge.t, Code::kInvalidArgument).find("overflows"), std::string::npos);
  Tensor empty_at_limit(nullptr, {kDLInt, 8, 1}, {0, INT64_MAX});  // exactly 2^63 - 1 bytes per row
  const TensorView at_limit = ViewOf(&empty_at_limit.t, "in");
  EXPECT_EQ(at_limit.bytes, 0u);
  EXPECT_EQ(at_limit.row_bytes(), static_cast<size_t>(INT64_MAX));

  Tensor offset(data, {kDLFloat, 32, 1}, {4});
  for (uint64_t bad : {uint64_t{1} << 63, UINT64_MAX, UINT64_MAX - 3}) {
    offset.t.byte_offset = bad;
    EXPECT_NE(ViewError(&offset.t, Code::kInvalidArgument)
                  .find(Str("+ byte_offset ", bad, " + 16 bytes runs past the end of the address space")),
              std::string::npos);
  }
  Tensor empty_offset(data, {kDLFloat, 32, 1}, {0});  // empty, yet its address must still make sense
  empty_offset.t.byte_offset = UINT64_MAX;
  EXPECT_NE(ViewError(&empty_offset.t, Code::kInvalidArgument).find("address space"), std::string::npos);
}

TEST(Tensor, RejectsNegativeDimensionsStridesAndRanks) {
  alignas(8) float data[8] = {};
  Tensor negative(data, {kDLFloat, 32, 1}, {INT64_MIN});
  EXPECT_NE(ViewError(&negative.t, Code::kInvalidArgument).find("negative dimension -9223372036854775808 at index 0"),
            std::string::npos);
  Tensor reversed(data, {kDLFloat, 32, 1}, {8}, {-1});
  EXPECT_NE(ViewError(&reversed.t, Code::kInvalidArgument).find("not contiguous (stride -1 at dimension 0, expected 1)"),
            std::string::npos);
  Tensor odd(data, {kDLFloat, 32, 1}, {2, 4}, {3, 1});
  EXPECT_NE(ViewError(&odd.t, Code::kInvalidArgument).find("stride 3 at dimension 0, expected 4"), std::string::npos);
  Tensor wild(data, {kDLFloat, 32, 1}, {2, 4}, {INT64_MIN, 1});
  EXPECT_NE(ViewError(&wild.t, Code::kInvalidArgument).find("not contiguous"), std::string::npos);
  Tensor unit_dim(data, {kDLFloat, 32, 1}, {1, 8}, {INT64_MIN, 1});  // extent 1: its stride is never used
  EXPECT_EQ(ViewOf(&unit_dim.t, "in").numel, 8u);
  Tensor deep(data, {kDLFloat, 32, 1}, std::vector<int64_t>(65, 1));
  EXPECT_NE(ViewError(&deep.t, Code::kInvalidArgument).find("ndim 65 (must be between 0 and 64)"), std::string::npos);
  deep.t.ndim = INT32_MIN;
  EXPECT_NE(ViewError(&deep.t, Code::kInvalidArgument).find("ndim -2147483648"), std::string::npos);
  Tensor deepest(data, {kDLFloat, 32, 1}, std::vector<int64_t>(64, 1));
  EXPECT_EQ(ViewOf(&deepest.t, "in").numel, 1u);
}

TEST(Tensor, InOutPairs) {
  alignas(8) float data[32] = {};
  Tensor a(data, {kDLFloat, 32, 1}, {16});
  Tensor b(data + 16, {kDLFloat, 32, 1}, {16});
  Tensor overlapping(data + 8, {kDLFloat, 32, 1}, {16});
  Tensor other_shape(data + 16, {kDLFloat, 32, 1}, {4, 4});
  Tensor other_dtype(data + 16, {kDLInt, 32, 1}, {16});
  const TensorView va = ViewOf(&a.t, "in");
  EXPECT_NO_THROW(CheckInOut(va, va, "in", "out"));                   // in place
  EXPECT_NO_THROW(CheckInOut(va, ViewOf(&b.t, "out"), "in", "out"));  // disjoint
  EXPECT_THROW(CheckInOut(va, ViewOf(&overlapping.t, "out"), "in", "out"), Error);
  EXPECT_NO_THROW(CheckSameLayout(va, ViewOf(&b.t, "out"), "in", "out"));
  EXPECT_THROW(CheckSameLayout(va, ViewOf(&other_shape.t, "out"), "in", "out"), Error);
  EXPECT_THROW(CheckSameLayout(va, ViewOf(&other_dtype.t, "out"), "in", "out"), Error);
}

struct Dummy {
  int value;
};
struct dummy_s;
using dummy_t = dummy_s*;

TEST(Handles, NeverReusedAndDoubleFreeIsCaught) {
  capi::HandleTable<Dummy, dummy_t> table("dummy");
  dummy_t a = table.Add(std::make_shared<Dummy>(Dummy{1}));
  dummy_t b = table.Add(std::make_shared<Dummy>(Dummy{2}));
  EXPECT_NE(a, b);
  EXPECT_EQ(table.Get(a)->value, 1);
  EXPECT_EQ(table.Take(a)->value, 1);
  try {
    table.Take(a);
    ADD_FAILURE() << "double free not caught";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kInvalidHandle);
    EXPECT_NE(std::string(e.what()).find("already freed"), std::string::npos);
  }
  EXPECT_THROW(table.Get(nullptr), Error);
  EXPECT_THROW(table.Get(reinterpret_cast<dummy_t>(uintptr_t{999})), Error);
  dummy_t c = table.Add(std::make_shared<Dummy>(Dummy{3}));
  EXPECT_NE(c, a);  // ids are not recycled
}

}  // namespace
}  // namespace starling
