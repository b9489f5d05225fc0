// A buffer a thread keeps from call to call on 2 MiB pages where the kernel grants them: the
// rasterizer's per-Gaussian records are read in each tile's depth order, scattered over megabytes, and
// on 4 KiB pages nearly every read is a TLB miss.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#else
#include <cstdlib>
#endif

namespace gsw {
namespace cpu {

// Grows (never shrinks) to the bytes asked, 64-byte aligned; the contents are not kept across growth.
class KeptBuffer {
 public:
  KeptBuffer() = default;
  KeptBuffer(const KeptBuffer&) = delete;
  KeptBuffer& operator=(const KeptBuffer&) = delete;
  ~KeptBuffer() { release(); }
  void* at_least(size_t bytes) {
    if (bytes <= size_) return data_;
    release();
    constexpr size_t kHuge = size_t(2) << 20;
    const size_t size = (bytes + kHuge - 1) / kHuge * kHuge;
#if defined(__linux__)
    // one huge page more, to start the buffer on a huge-page boundary
    void* p = mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    map_ = p;
    map_size_ = size + kHuge;
    const uintptr_t a = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~uintptr_t(kHuge - 1);
    data_ = reinterpret_cast<void*>(a);
    madvise(data_, size, MADV_HUGEPAGE);  // a hint: 4 KiB pages where it is refused
#else
    data_ = std::aligned_alloc(64, size);
    if (data_ == nullptr) throw std::bad_alloc();
#endif
    size_ = size;
    return data_;
  }

 private:
  void release() {
#if defined(__linux__)
    if (map_ != nullptr) munmap(map_, map_size_);
    map_ = nullptr;
#else
    std::free(data_);
#endif
    data_ = nullptr;
    size_ = 0;
  }
  void* data_ = nullptr;
  size_t size_ = 0;
#if defined(__linux__)
  void* map_ = nullptr;
  size_t map_size_ = 0;
#endif
};

}  // namespace cpu
}  // namespace gsw
