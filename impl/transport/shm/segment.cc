#include "impl/transport/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <random>

#include "impl/common/error.h"

namespace starling::transport::shm {
namespace {

constexpr uint64_t kSegmentMagic = 0x314D48534C525453ull;  // "STRLSHM1"
constexpr uint32_t kSegmentLayoutVersion = 1;
constexpr uint32_t kMaxPeers = 1u << 16;

std::string ErrnoText(int error) { return std::strerror(error); }

size_t PageRound(size_t bytes) {
  const long page = sysconf(_SC_PAGESIZE);
  const size_t p = page > 0 ? static_cast<size_t>(page) : 4096;
  return (bytes + p - 1) / p * p;
}

std::string PathOf(const SegmentOptions& options, const std::string& name) {
  // POSIX names start with '/': the file is <directory><name>.
  return options.directory + name;
}

void CheckName(const std::string& name) {
  STARLING_CHECK_ARG(name.size() >= 2 && name.size() <= 200 && name[0] == '/' &&
                         name.find('/', 1) == std::string::npos,
                     "shared-memory segment name '", name, "' must be '/' and 1-199 characters without '/'");
}

}  // namespace

std::string SegmentName(uint64_t job, const std::string& purpose, int rank, uint32_t nonce) {
  STARLING_CHECK_ARG(!purpose.empty() && purpose.size() <= 16 &&
                         purpose.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos,
                     "segment purpose '", purpose, "' must be 1-16 characters of [a-z0-9_]");
  char text[128];
  std::snprintf(text, sizeof text, "/starling-u%u-j%016llx-%s-r%d-%08x", static_cast<unsigned>(getuid()),
                static_cast<unsigned long long>(job), purpose.c_str(), rank, nonce);
  return text;
}

uint32_t NewNonce() {
  static std::atomic<uint32_t> counter{0};
  std::random_device device;
  const uint64_t t = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return device() ^ static_cast<uint32_t>(t) ^ (static_cast<uint32_t>(getpid()) << 12) ^
         (counter.fetch_add(0x9E3779B9u) );
}

uint64_t FreeBytes(const std::string& directory) {
  struct statvfs fs {};
  STARLING_CHECK(statvfs(directory.c_str(), &fs) == 0, Code::kTransport, "statvfs(", directory,
                 ") failed: ", ErrnoText(errno));
  return static_cast<uint64_t>(fs.f_bavail) * static_cast<uint64_t>(fs.f_frsize);
}

std::string FormatBytes(uint64_t bytes) {
  char text[64];
  if (bytes >= (uint64_t{1} << 30)) std::snprintf(text, sizeof text, "%.1f GiB", bytes / 1073741824.0);
  else if (bytes >= (uint64_t{1} << 20)) std::snprintf(text, sizeof text, "%.1f MiB", bytes / 1048576.0);
  else if (bytes >= 1024) std::snprintf(text, sizeof text, "%.1f KiB", bytes / 1024.0);
  else std::snprintf(text, sizeof text, "%llu bytes", static_cast<unsigned long long>(bytes));
  return text;
}

Segment::~Segment() { Reset(); }

Segment::Segment(Segment&& other) noexcept { *this = std::move(other); }

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    Reset();
    name_ = std::move(other.name_);
    path_ = std::move(other.path_);
    base_ = other.base_;
    bytes_ = other.bytes_;
    unlinked_ = other.unlinked_;
    creator_ = other.creator_;
    fd_ = other.fd_;
    other.fd_ = -1;
    other.creator_ = false;
    other.base_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void Segment::Reset() {
  if (creator_) Unlink();
  creator_ = false;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  if (base_ != nullptr) munmap(base_, bytes_);
  base_ = nullptr;
  bytes_ = 0;
}

Segment Segment::Create(const std::string& name, size_t payload_bytes, uint32_t expected_peers,
                        const SegmentOptions& options) {
  return CreateSparse(name, payload_bytes, payload_bytes, expected_peers, options);
}

Segment Segment::CreateSparse(const std::string& name, size_t payload_bytes, size_t reserved_bytes,
                              uint32_t expected_peers, const SegmentOptions& options) {
  CheckName(name);
  STARLING_CHECK_ARG(expected_peers <= kMaxPeers, "a segment may have at most ", kMaxPeers, " peers, not ",
                     expected_peers);
  STARLING_CHECK_ARG(payload_bytes <= (size_t{1} << 40), "segment of ", payload_bytes, " bytes is too large");
  STARLING_CHECK_ARG(reserved_bytes <= payload_bytes, "cannot reserve ", reserved_bytes, " bytes of a ",
                     payload_bytes, "-byte segment");
  const size_t total = PageRound(kSegmentHeaderBytes + payload_bytes);
  const size_t reserved = std::min(total, PageRound(kSegmentHeaderBytes + reserved_bytes));
  const uint64_t free = options.free_bytes ? options.free_bytes() : FreeBytes(options.directory);
  STARLING_CHECK(free >= reserved, Code::kOutOfMemory, options.directory, " has ", FormatBytes(free),
                 " free, a shared-memory segment needs ", FormatBytes(reserved),
                 " (a container's /dev/shm is often 64 MiB: docker run --shm-size raises it)");
  Segment segment;
  segment.name_ = name;
  segment.path_ = PathOf(options, name);
  segment.unlinked_ = true;  // until the file exists
  const int fd = open(segment.path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int error = errno;
    Fail(error == EEXIST ? Code::kAlreadyExists : Code::kTransport, "cannot create shared-memory segment ",
         segment.path_, ": ", ErrnoText(error));
  }
  auto fail = [&](Code code, const std::string& what, int error) {
    close(fd);
    unlink(segment.path_.c_str());
    Fail(code, what, " for shared-memory segment ", segment.path_, " (", FormatBytes(total), "): ",
         ErrnoText(error));
  };
  if (ftruncate(fd, static_cast<off_t>(total)) != 0) fail(Code::kTransport, "ftruncate failed", errno);
  // Reserve every page now: a full /dev/shm is an error here, not a SIGBUS on first touch.
  const int reserve_error = posix_fallocate(fd, 0, static_cast<off_t>(reserved));
  if (reserve_error != 0) {
    fail(reserve_error == ENOSPC ? Code::kOutOfMemory : Code::kTransport,
         Str("cannot reserve the pages (", options.directory, " has ", FormatBytes(FreeBytes(options.directory)),
             " free)"),
         reserve_error);
  }
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) fail(Code::kOutOfMemory, "mmap failed", errno);
  if (reserved < total) segment.fd_ = fd;  // Reserve needs it
  else close(fd);
  segment.base_ = base;
  segment.bytes_ = total;
  segment.unlinked_ = false;
  segment.creator_ = true;
  // The file is zero-filled: attached starts at 0. The fields peers validate come first.
  SegmentHeader* header = new (base) SegmentHeader{};
  header->magic = kSegmentMagic;
  header->layout_version = kSegmentLayoutVersion;
  header->expected_peers = expected_peers;
  header->total_bytes = total;
  header->creator_pid = static_cast<int32_t>(getpid());
  header->attached.store(0, std::memory_order_release);
  if (expected_peers == 0) segment.Unlink();
  return segment;
}

Segment Segment::Open(const std::string& name, const SegmentOptions& options) {
  CheckName(name);
  Segment segment;
  segment.name_ = name;
  segment.path_ = PathOf(options, name);
  const int fd = open(segment.path_.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    Fail(error == ENOENT ? Code::kNotFound : Code::kTransport, "cannot open shared-memory segment ", segment.path_,
         ": ", ErrnoText(error),
         error == ENOENT ? " (a different /dev/shm: another container or mount namespace?)" : "");
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int error = errno;
    close(fd);
    Fail(Code::kTransport, "fstat of ", segment.path_, " failed: ", ErrnoText(error));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kSegmentHeaderBytes || size > (uint64_t{1} << 41)) {
    close(fd);
    Fail(Code::kTransport, "shared-memory segment ", segment.path_, " has ", size,
         " bytes: not a Starling segment (or its creator has not set it up)");
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  close(fd);
  STARLING_CHECK(base != MAP_FAILED, Code::kTransport, "cannot map shared-memory segment ", segment.path_, ": ",
                 ErrnoText(error));
  segment.base_ = base;
  segment.bytes_ = size;
  // Everything below reads a header another process wrote: check before trusting it.
  const SegmentHeader& header = segment.header();
  STARLING_CHECK(header.magic == kSegmentMagic && header.layout_version == kSegmentLayoutVersion, Code::kTransport,
                 "shared-memory segment ", segment.path_, " has a corrupted or foreign header (magic ", std::hex,
                 header.magic, ", layout ", std::dec, header.layout_version, ")");
  STARLING_CHECK(header.total_bytes == size && header.expected_peers <= kMaxPeers, Code::kTransport,
                 "shared-memory segment ", segment.path_, " has a corrupted header (", header.total_bytes,
                 " bytes and ", header.expected_peers, " peers recorded, ", size, " bytes found)");
  const uint32_t count = segment.header().attached.fetch_add(1, std::memory_order_acq_rel) + 1;
  STARLING_CHECK(count <= header.expected_peers, Code::kTransport, "shared-memory segment ", segment.path_,
                 " was mapped by ", count, " peers, ", header.expected_peers, " expected");
  if (count == header.expected_peers) segment.Unlink();  // the last peer: nothing is left behind
  return segment;
}

bool Segment::Reserve(size_t offset, size_t bytes) {
  STARLING_CHECK(base_ != nullptr && creator_, Code::kInternal, "Reserve on a segment this process did not create");
  STARLING_CHECK_ARG(offset <= payload_bytes() && bytes <= payload_bytes() - offset, "cannot reserve ", bytes,
                     " bytes at ", offset, " of a ", payload_bytes(), "-byte segment");
  if (fd_ < 0 || bytes == 0) return true;  // reserved whole at creation
  return posix_fallocate(fd_, static_cast<off_t>(kSegmentHeaderBytes + offset), static_cast<off_t>(bytes)) == 0;
}

void Segment::Unlink() {
  if (unlinked_ || path_.empty()) return;
  unlinked_ = true;
  unlink(path_.c_str());  // ENOENT: a peer or the creator removed it already
}

}  // namespace starling::transport::shm
