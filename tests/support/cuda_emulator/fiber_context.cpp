// The CUDA emulator's fibers: a stack and a saved stack pointer (fiber_context.h).
//
// On x86-64 a switch saves the callee-saved registers and the FP control words on the current
// stack, stores the stack pointer, and loads the other fiber's: about ten instructions, where
// swapcontext also makes two system calls for the signal mask (which made it half the run time).
// Elsewhere, ucontext. (With the race checker, tests/support/cuda_emulator/racecheck.h, each switch
// also tells ThreadSanitizer which fiber runs next.)
#include "tests/support/cuda_emulator/fiber_context.h"

#include <cstdint>

#if defined(__x86_64__)
extern "C" void emu_switch_stack(void** save_sp, void* load_sp);
asm(R"(
  .text
  .globl emu_switch_stack
  .type emu_switch_stack, @function
emu_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_switch_stack, .-emu_switch_stack
)");
#endif

namespace emu::detail {

#if defined(__x86_64__)

void start_fiber_context(FiberContext& context, char* stack, std::size_t bytes, void (*entry)()) {
  uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + bytes) & ~uintptr_t(15);
  uint64_t* frame = reinterpret_cast<uint64_t*>(top) - 9;  // what emu_switch_stack pops, + 1
  frame[0] = 0x1F80 | (uint64_t(0x037F) << 32);  // MXCSR and x87 control word at their defaults
  for (int i = 1; i <= 6; ++i) frame[i] = 0;     // r15 r14 r13 r12 rbx rbp
  frame[7] = reinterpret_cast<uint64_t>(entry);  // the return address; entry then sees the
  frame[8] = 0;                                  // stack aligned as right after a call
  context.sp = frame;
}

void switch_fiber_context(FiberContext& from, FiberContext& to) {
  emu_switch_stack(&from.sp, to.sp);
}
#else
void start_fiber_context(FiberContext& c, char* stack, std::size_t bytes, void (*entry)()) {
  getcontext(&c.context);
  c.context.uc_stack.ss_sp = stack;
  c.context.uc_stack.ss_size = bytes;
  c.context.uc_link = nullptr;
  makecontext(&c.context, entry, 0);
}

void switch_fiber_context(FiberContext& from, FiberContext& to) {
  swapcontext(&from.context, &to.context);
}
#endif

}  // namespace emu::detail
