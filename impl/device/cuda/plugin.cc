// The exported entry point: the plugin table over this directory's implementations.
#include "impl/device/plugin_abi.h"

#include "impl/device/cuda/errors.h"
#include "impl/device/cuda/plugin.h"

namespace starling::device::cuda {
namespace {

const starling_device_plugin_t kTable = {
    sizeof(starling_device_plugin_t),
    STARLING_DEVICE_ABI_VERSION,
    LastError,
    Init,
    Describe,
    DeviceCount,
    SetDevice,
    DeviceIdentity,
    PointerKind,
    DeviceAlloc,
    DeviceFree,
    HostAlloc,
    HostFree,
    StreamCreate,
    StreamDestroy,
    StreamSynchronize,
    EventCreate,
    EventDestroy,
    EventRecord,
    EventQuery,
    EventSynchronize,
    StreamWaitEvent,
    MemcpyAsync,
    Reduce,
    Divide,
    WeightedSum,
    Convert,
    NcclLoad,
    NcclDescribe,
    NcclUniqueId,
    NcclCommInit,
    NcclCommDestroy,
    NcclCommAbort,
    NcclAllReduce,
    NcclBroadcast,
    NcclAllGather,
    NcclGroupStart,
    NcclGroupEnd,
    NcclSend,
    NcclRecv,
    NcclCommStatus,
    StreamIsCapturing,
    NcclReduceScatter,
};

}  // namespace
}  // namespace starling::device::cuda

// The only exported symbol (exports.map hides everything else, the static CUDA runtime
// included). Loading the plugin touches no driver: init() does.
extern "C" __attribute__((visibility("default"))) const starling_device_plugin_t* starling_device_plugin_v1(void) {
  return &starling::device::cuda::kTable;
}
