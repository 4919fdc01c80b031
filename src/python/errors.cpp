// Tandem's C++ exceptions arrive in Python as TensorFlow's exception classes
// (tandem.errors: InvalidArgumentError, ResourceExhaustedError, NotFoundError, ...), each a
// subclass of the matching builtin, with Tandem's message.
#include <cctype>
#include <exception>
#include <string>
#include <string_view>

#include "python/bindings.h"
#include "tandem/error.h"

namespace tandem::python {
namespace {

void raise_as(const char* class_name, const char* message) {
  const nb::object error_class = nb::module_::import_("tandem.errors").attr(class_name);
  PyErr_SetString(error_class.ptr(), message);
}

bool mentions(std::string_view message, std::string_view text) {
  return message.find(text) != std::string_view::npos;
}

// An IoError's class by what the system said: TensorFlow raises NotFoundError for a missing file
// and PermissionDeniedError for a refused one; everything else that cannot be read is data loss.
const char* io_error_class(std::string_view original) {
  std::string message(original);
  for (char& c : message)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (mentions(message, "no such file") || mentions(message, "does not exist") ||
      mentions(message, "not found")) {
    return "NotFoundError";
  }
  if (mentions(message, "permission denied")) return "PermissionDeniedError";
  return "DataLossError";
}

}  // namespace

void bind_errors(nb::module_& module) {
  nb::register_exception_translator([](const std::exception_ptr& pointer, void*) {
    try {
      std::rethrow_exception(pointer);
    } catch (const OutOfMemory& error) {
      raise_as("ResourceExhaustedError", error.what());
    } catch (const InvalidArgument& error) {
      raise_as("InvalidArgumentError", error.what());
    } catch (const IoError& error) {
      raise_as(io_error_class(error.what()), error.what());
    } catch (const Error& error) {
      raise_as(std::string_view(error.what()).starts_with("internal error") ? "InternalError"
                                                                            : "UnknownError",
               error.what());
    }
  });
}

}  // namespace tandem::python
