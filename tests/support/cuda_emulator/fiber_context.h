// The CUDA emulator's fibers (fiber_context.cpp): each emulated thread runs on its own stack, and
// the scheduler (scheduler.cpp) switches between them cooperatively. A context is a saved stack
// pointer on x86-64 (a hand-written switch of about ten instructions) and a ucontext elsewhere.
#pragma once

#include <cstddef>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace emu::detail {

#if defined(__x86_64__)
struct FiberContext {
  void* sp = nullptr;
};
#else
struct FiberContext {
  ucontext_t context;
};
#endif

// A fresh fiber on `stack` (`bytes` long): its first switch "returns" into entry, which must
// never return.
void start_fiber_context(FiberContext& context, char* stack, std::size_t bytes, void (*entry)());
// Saves the running fiber's state into `from` and resumes `to`.
void switch_fiber_context(FiberContext& from, FiberContext& to);

}  // namespace emu::detail
