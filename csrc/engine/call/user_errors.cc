#include "engine/call/user_errors.h"

#include <c10/util/Exception.h>

#include <stdexcept>

#include "lowering/registry.h"
#include "program/program.h"

namespace tpu::engine {

void rethrow_as_user_error(const std::string& who) {
  try {
    throw;
  } catch (const lowering::NotLowerable& e) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, who, ": cannot lower ", e.what());
  } catch (const lowering::InvalidCall& e) {
    TORCH_CHECK_NOT_IMPLEMENTED(!e.not_implemented, who, ": ", e.what());
    TORCH_CHECK(false, who, ": ", e.what());
  } catch (const program::ProgramError& e) {
    TORCH_CHECK(false, who, ": ", e.what());
  } catch (const std::out_of_range& e) {
    TORCH_CHECK_INDEX(false, who, ": ", e.what());
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, who, ": ", e.what());
  }
}

}  // namespace tpu::engine
