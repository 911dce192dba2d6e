#include "engine/storage.h"

#include "engine/allocator.h"

namespace engine {

Storage::Storage(std::size_t bytes, Device device)
    : data_(allocate(bytes, device)), nbytes_(bytes), device_(device) {}

Storage::~Storage() { deallocate(data_, nbytes_, device_); }

}  // namespace engine
