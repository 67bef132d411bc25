#include "transport/registered_memory.h"

namespace ds::transport {

RegisteredMemory::~RegisteredMemory() { ucp_mem_unmap(context_, memh_); }

}  // namespace ds::transport
