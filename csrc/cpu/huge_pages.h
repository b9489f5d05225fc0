// Transparent huge pages (Linux) for large CPU buffers: an output's first touch faults 4 KiB at a time,
// and a buffer read at scattered places misses the TLB on nearly every read; 2 MiB pages cut both.
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

constexpr size_t kHugePage = size_t(2) << 20;

// Asks Linux for transparent huge pages under the 2 MiB-aligned inside of [p, p + bytes); with THP in
// "madvise" mode the kernel then maps 2 MiB per fault. Pages already present are not moved; the
// contents are never touched. A hint: errors are ignored, and other systems do nothing.
inline void advise_huge_pages(const void* p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~uintptr_t(kHugePage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~uintptr_t(kHugePage - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p, (void)bytes;
#endif
}

// A buffer a thread keeps from call to call, on a 2 MiB boundary and advised to huge pages: it grows
// (never shrinks) to the bytes asked; the contents are not kept across growth.
class KeptBuffer {
 public:
  KeptBuffer() = default;
  KeptBuffer(const KeptBuffer&) = delete;
  KeptBuffer& operator=(const KeptBuffer&) = delete;
  ~KeptBuffer() { release(); }
  void* at_least(size_t bytes) {
    if (bytes <= size_) return data_;
    release();
    const size_t size = (bytes + kHugePage - 1) / kHugePage * kHugePage;
#if defined(__linux__)
    // one huge page more, to start the buffer on a huge-page boundary
    void* p = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    map_ = p;
    data_ = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~uintptr_t(kHugePage - 1));
    advise_huge_pages(data_, size);
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
    if (map_ != nullptr) munmap(map_, size_ + kHugePage);
    map_ = nullptr;
#else
    std::free(data_);
#endif
    data_ = nullptr;
    size_ = 0;
  }
  void* data_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;  // the mapping data_ lies in (Linux)
};

}  // namespace cpu
}  // namespace gsw
