// Explicit instantiation without writing a signature twice. A kernel's CPU function templates are
// declared in its header and defined in its _cpu.cpp, which ends with one line per function:
//
//   ENGINE_INSTANTIATE_FLOATING(softmax_cpu);          // softmax_cpu<float>, softmax_cpu<double>
//   ENGINE_INSTANTIATE(fill_cpu, int64_t);             // one more type
//   ENGINE_INSTANTIATE(convert_cpu, int64_t, float);   // several template arguments
//
// decltype(f<T>) is the type of that specialization as the header declares it, so the
// instantiation always matches the declaration.
#pragma once

#define ENGINE_INSTANTIATE(function, ...) \
  template decltype(function<__VA_ARGS__>) function<__VA_ARGS__>

// float (f32, the training precision) and double (f64, the gradient checks' precision).
#define ENGINE_INSTANTIATE_FLOATING(function) \
  ENGINE_INSTANTIATE(function, float);        \
  ENGINE_INSTANTIATE(function, double)
