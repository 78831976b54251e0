// Lets the registry's CUDA build of torch 2.14 and torch_npu load into one process. Shipped in
// braid-acl-sim's wheel and loaded by `braid-acl-sim run` into every Python it starts (see
// braid_acl_sim/preload/sitecustomize.py); not needed with a CPU-only torch build.
//
// torch's libc10_cuda.so and torch_npu's libtorch_npu.so both register their allocator
// configuration keys ('pinned_reserve_segment_size_mb', 'per_process_memory_fraction', ...)
// in c10's one key set, c10::CachingAllocator::AcceleratorAllocatorConfig::getMutableKeys(),
// and the registration (inlined into each library) aborts on a duplicate key, so torch_npu
// cannot be imported next to the CUDA library. This library, loaded with RTLD_GLOBAL before
// torch, interposes getMutableKeys(): a call from libc10_cuda.so gets a private set of its
// own, every other caller the real one (libc10.so's). No CUDA code runs on braid-acl-sim, so
// the CUDA library's keys are never parsed. libc10.so is loaded privately (as a dependency of
// torch._C), so the real function is looked up in it by name. (LD_PRELOAD would do the same,
// but torch_npu changes how it finds CANN's functions when LD_PRELOAD is set.)
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_set>

namespace {
using Keys = std::unordered_set<std::string>;
using GetKeys = Keys& (*)();
constexpr const char* kSymbol =
    "_ZN3c1016CachingAllocator26AcceleratorAllocatorConfig14getMutableKeysB5cxx11Ev";

bool CalledFromCuda(void* return_address) {
  Dl_info info;
  return dladdr(return_address, &info) != 0 && info.dli_fname != nullptr &&
         std::strstr(info.dli_fname, "libc10_cuda") != nullptr;
}
}  // namespace

// The mangled name of c10::CachingAllocator::AcceleratorAllocatorConfig::getMutableKeys().
Keys& BraidGetMutableKeys() __asm__(
    "_ZN3c1016CachingAllocator26AcceleratorAllocatorConfig14getMutableKeysB5cxx11Ev");

__attribute__((visibility("default"))) Keys& BraidGetMutableKeys() {
  if (CalledFromCuda(__builtin_return_address(0))) {
    static Keys cuda_keys;
    return cuda_keys;
  }
  static GetKeys real = [] {
    void* c10 = dlopen("libc10.so", RTLD_LAZY | RTLD_NOLOAD);
    return c10 == nullptr ? nullptr : reinterpret_cast<GetKeys>(dlsym(c10, kSymbol));
  }();
  if (real == nullptr) {
    // Not reachable while torch is loaded (every caller is a torch library); better a clear
    // stop than a jump to null.
    std::abort();
  }
  return real();
}
