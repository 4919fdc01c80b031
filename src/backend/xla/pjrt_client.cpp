// The PJRT client: a plugin loaded with dlopen and driven through the PJRT C API header that
// scripts/fetch-pjrt.sh fetched. Every args struct is zeroed with its struct_size set from the
// header (a plugin newer than the header accepts it; an older one refuses it with an error),
// every returned PJRT_Error becomes a PjrtError, every event is awaited and destroyed, and every
// object is destroyed by the RAII owner that holds it.
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>

#include "backend/xla/proto/compile_options.pb.h"
#include "pjrt_c_api.h"
#include "tandem/xla.h"

namespace tandem::xla {
namespace {

// A zeroed args struct of the header's size: extension_start null, every other field zero.
template <typename Args>
Args args(std::size_t struct_size) {
  Args value;
  std::memset(&value, 0, sizeof value);
  value.struct_size = struct_size;
  return value;
}
#define TANDEM_PJRT_ARGS(type) args<type>(type##_STRUCT_SIZE)

const char* code_name(PJRT_Error_Code code) {
  switch (code) {
    case PJRT_Error_Code_CANCELLED:
      return "CANCELLED";
    case PJRT_Error_Code_INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case PJRT_Error_Code_DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case PJRT_Error_Code_NOT_FOUND:
      return "NOT_FOUND";
    case PJRT_Error_Code_ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case PJRT_Error_Code_PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case PJRT_Error_Code_RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case PJRT_Error_Code_FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case PJRT_Error_Code_ABORTED:
      return "ABORTED";
    case PJRT_Error_Code_OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case PJRT_Error_Code_UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case PJRT_Error_Code_INTERNAL:
      return "INTERNAL";
    case PJRT_Error_Code_UNAVAILABLE:
      return "UNAVAILABLE";
    case PJRT_Error_Code_DATA_LOSS:
      return "DATA_LOSS";
    case PJRT_Error_Code_UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

std::string text_of(const char* data, std::size_t size) {
  return data == nullptr ? std::string() : std::string(data, size);
}

PJRT_Buffer_Type buffer_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return PJRT_Buffer_Type_F32;
    case DType::f64:
      return PJRT_Buffer_Type_F64;
    case DType::bf16:
      return PJRT_Buffer_Type_BF16;
    case DType::f16:
      return PJRT_Buffer_Type_F16;
    case DType::i32:
      return PJRT_Buffer_Type_S32;
    case DType::i64:
      return PJRT_Buffer_Type_S64;
    case DType::u8:
      return PJRT_Buffer_Type_U8;
    case DType::boolean:
      return PJRT_Buffer_Type_PRED;
    case DType::i8:
      return PJRT_Buffer_Type_S8;
  }
  return PJRT_Buffer_Type_INVALID;
}

std::optional<DType> dtype_of(PJRT_Buffer_Type type) {
  for (int index = 0; index < kNumDTypes; ++index) {
    const auto dtype = static_cast<DType>(index);
    if (buffer_type(dtype) == type) return dtype;
  }
  return std::nullopt;
}

// A plugin, loaded once per process and never unloaded (plugins do not promise to unload).
class Plugin {
 public:
  explicit Plugin(const std::string& path) {
    info_.path = path;
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      throw PjrtError("cannot load the PJRT plugin " + path + ": " + ::dlerror() +
                      "; check the path (scripts/fetch-pjrt.sh fetches the XLA:CPU plugin, "
                      "`pip install libtpu` the TPU one)");
    }
    using GetPjrtApi = const PJRT_Api* (*)();
    const auto get_api = reinterpret_cast<GetPjrtApi>(::dlsym(handle, "GetPjrtApi"));
    if (get_api == nullptr) {
      throw PjrtError(path + " is not a PJRT plugin: it exports no GetPjrtApi");
    }
    api_ = get_api();
    if (api_ == nullptr) throw PjrtError(path + ": GetPjrtApi() returned no API");
    info_.api_major = api_->pjrt_api_version.major_version;
    info_.api_minor = api_->pjrt_api_version.minor_version;
    if (info_.api_major != PJRT_API_MAJOR) {
      throw PjrtError(path + " has PJRT C API " + version() + ", Tandem was built with " +
                      std::to_string(PJRT_API_MAJOR) + "." + std::to_string(PJRT_API_MINOR) +
                      " and needs the same major version; use a plugin of major version " +
                      std::to_string(PJRT_API_MAJOR));
    }
    // An older plugin's table ends before functions the header has, and calling past its end
    // would jump anywhere: such a plugin is refused.
    if (api_->struct_size < PJRT_Api_STRUCT_SIZE || info_.api_minor < PJRT_API_MINOR) {
      throw PjrtError(path + " has PJRT C API " + version() + ", older than the " +
                      std::to_string(PJRT_API_MAJOR) + "." + std::to_string(PJRT_API_MINOR) +
                      " Tandem was built with (its function table is " +
                      std::to_string(api_->struct_size) + " bytes, " +
                      std::to_string(PJRT_Api_STRUCT_SIZE) +
                      " expected); use a newer plugin (pip install the current jax-cuda13-pjrt "
                      "or libtpu; scripts/fetch-pjrt.sh fetches XLA:CPU's)");
    }
    auto initialize = TANDEM_PJRT_ARGS(PJRT_Plugin_Initialize_Args);
    check(api_->PJRT_Plugin_Initialize(&initialize), "PJRT_Plugin_Initialize");
    auto attributes = TANDEM_PJRT_ARGS(PJRT_Plugin_Attributes_Args);
    check(api_->PJRT_Plugin_Attributes(&attributes), "PJRT_Plugin_Attributes");
    for (std::size_t i = 0; i < attributes.num_attributes; ++i) {
      const PJRT_NamedValue& value = attributes.attributes[i];
      info_.attributes.emplace_back(text_of(value.name, value.name_size), value_text(value));
    }
  }

  const PJRT_Api* api() const { return api_; }
  const PluginInfo& info() const { return info_; }
  std::string version() const {
    return std::to_string(info_.api_major) + "." + std::to_string(info_.api_minor);
  }

  // Throws PjrtError for a failed call ("<plugin>: <call>: <message> [<code>]"), destroying the
  // error first. `detail` is added to the message (a compile error's StableHLO line).
  void check(PJRT_Error* error, std::string_view call,
             const std::function<std::string(const std::string&)>& detail = {}) const {
    if (error == nullptr) return;
    auto message = TANDEM_PJRT_ARGS(PJRT_Error_Message_Args);
    message.error = error;
    api_->PJRT_Error_Message(&message);
    std::string text = text_of(message.message, message.message_size);
    auto code = TANDEM_PJRT_ARGS(PJRT_Error_GetCode_Args);
    code.error = error;
    const bool coded = api_->PJRT_Error_GetCode(&code) == nullptr;
    discard(error);
    std::replace(text.begin(), text.end(), '\n', ' ');
    std::string full = info_.path + ": " + std::string(call) + ": " + text;
    if (coded) full += std::string(" [") + code_name(code.code) + "]";
    if (detail) full += detail(text);
    if (coded && code.code == PJRT_Error_Code_RESOURCE_EXHAUSTED) throw PjrtOutOfMemory(full);
    throw PjrtError(full);
  }

  // Frees an error (after check() read it, or unread where nothing may throw: a destructor's
  // failure to destroy is the plugin's to log).
  void discard(PJRT_Error* error) const {
    if (error == nullptr) return;
    auto destroy = TANDEM_PJRT_ARGS(PJRT_Error_Destroy_Args);
    destroy.error = error;
    api_->PJRT_Error_Destroy(&destroy);
  }

  // Waits for `event`, destroys it and throws the error it carried.
  void await(PJRT_Event* event, std::string_view what) const {
    if (event == nullptr) return;
    auto wait = TANDEM_PJRT_ARGS(PJRT_Event_Await_Args);
    wait.event = event;
    PJRT_Error* failed = api_->PJRT_Event_Await(&wait);
    auto destroy = TANDEM_PJRT_ARGS(PJRT_Event_Destroy_Args);
    destroy.event = event;
    PJRT_Error* not_destroyed = api_->PJRT_Event_Destroy(&destroy);
    check(failed, what);
    check(not_destroyed, "PJRT_Event_Destroy");
  }

 private:
  static std::string value_text(const PJRT_NamedValue& value) {
    switch (value.type) {
      case PJRT_NamedValue_kString:
        return text_of(value.string_value, value.value_size);
      case PJRT_NamedValue_kInt64:
        return std::to_string(value.int64_value);
      case PJRT_NamedValue_kInt64List: {
        std::string text;
        for (std::size_t i = 0; i < value.value_size; ++i) {
          if (i > 0) text += '.';
          text += std::to_string(value.int64_array_value[i]);
        }
        return text;
      }
      case PJRT_NamedValue_kFloat:
        return std::to_string(value.float_value);
      case PJRT_NamedValue_kBool:
        return value.bool_value ? "true" : "false";
    }
    return "?";
  }

  PluginInfo info_;
  const PJRT_Api* api_ = nullptr;
};

// The plugins loaded so far, by path: a plugin is initialised once per process.
const Plugin& load_plugin(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Plugin>> plugins;
  std::lock_guard lock(mutex);
  std::unique_ptr<Plugin>& plugin = plugins[path];
  if (!plugin) {
    try {
      plugin = std::make_unique<Plugin>(path);
    } catch (...) {
      plugins.erase(path);
      throw;
    }
  }
  return *plugin;
}

// " (StableHLO line 3: `%0 = stablehlo.add ...`)" for a message that points at "-:3:7" (MLIR's
// location of a parse or verification error in text without a file name).
std::string stablehlo_line(const std::string& message, const std::string& mlir) {
  for (const std::string_view prefix : {"-:", "<stdin>:", "loc(\"-\":"}) {
    const std::size_t at = message.find(prefix);
    if (at == std::string::npos) continue;
    std::size_t line = 0;
    std::size_t position = at + prefix.size();
    while (position < message.size() && std::isdigit(static_cast<unsigned char>(message[position])))
      line = line * 10 + static_cast<std::size_t>(message[position++] - '0');
    if (line == 0) continue;
    std::istringstream lines(mlir);
    std::string text;
    for (std::size_t number = 1; std::getline(lines, text); ++number) {
      if (number != line) continue;
      const std::size_t first = text.find_first_not_of(' ');
      return " (StableHLO line " + std::to_string(line) + ": `" +
             (first == std::string::npos ? text : text.substr(first)) + "`)";
    }
  }
  return "";
}

}  // namespace

struct Client::Impl {
  const Plugin* plugin = nullptr;
  PJRT_Client* client = nullptr;
  std::string platform;
  std::string platform_version;
  std::vector<PJRT_Device*> handles;
  std::vector<DeviceInfo> devices;

  ~Impl() {
    if (client == nullptr) return;
    auto destroy = TANDEM_PJRT_ARGS(PJRT_Client_Destroy_Args);
    destroy.client = client;
    plugin->discard(plugin->api()->PJRT_Client_Destroy(&destroy));
  }

  int index_of(PJRT_Device* device) const {
    for (std::size_t i = 0; i < handles.size(); ++i) {
      if (handles[i] == device) return static_cast<int>(i);
    }
    return -1;
  }
};

struct Buffer::Impl {
  std::shared_ptr<const Client::Impl> client;  // outlives the buffer
  PJRT_Buffer* buffer = nullptr;
  Shape shape;
  DType dtype = DType::f32;
  int device = 0;

  ~Impl() {
    if (buffer == nullptr) return;
    auto destroy = TANDEM_PJRT_ARGS(PJRT_Buffer_Destroy_Args);
    destroy.buffer = buffer;
    client->plugin->discard(client->plugin->api()->PJRT_Buffer_Destroy(&destroy));
  }

  // An owner for an output buffer; its device, dtype and shape come from describe().
  static std::shared_ptr<Impl> own(std::shared_ptr<const Client::Impl> client,
                                   PJRT_Buffer* buffer) {
    auto impl = std::make_shared<Impl>();
    impl->client = std::move(client);
    impl->buffer = buffer;
    return impl;
  }

  // The device, dtype and shape the plugin gives the buffer.
  void describe() {
    const Plugin& plugin = *client->plugin;
    auto where = TANDEM_PJRT_ARGS(PJRT_Buffer_Device_Args);
    where.buffer = buffer;
    plugin.check(plugin.api()->PJRT_Buffer_Device(&where), "PJRT_Buffer_Device");
    device = client->index_of(where.device);
    auto type = TANDEM_PJRT_ARGS(PJRT_Buffer_ElementType_Args);
    type.buffer = buffer;
    plugin.check(plugin.api()->PJRT_Buffer_ElementType(&type), "PJRT_Buffer_ElementType");
    const std::optional<DType> known = dtype_of(type.type);
    if (!known) {
      throw PjrtError(plugin.info().path + ": an output has PJRT element type " +
                      std::to_string(static_cast<int>(type.type)) +
                      ", which Tandem has no dtype for");
    }
    dtype = *known;
    auto dims = TANDEM_PJRT_ARGS(PJRT_Buffer_Dimensions_Args);
    dims.buffer = buffer;
    plugin.check(plugin.api()->PJRT_Buffer_Dimensions(&dims), "PJRT_Buffer_Dimensions");
    shape.assign(dims.dims, dims.dims + dims.num_dims);
  }
};

struct Executable::Impl {
  std::shared_ptr<const Client::Impl> client;
  PJRT_LoadedExecutable* executable = nullptr;
  std::size_t num_outputs = 0;
  std::size_t num_replicas = 1;

  ~Impl() {
    if (executable == nullptr) return;
    auto destroy = TANDEM_PJRT_ARGS(PJRT_LoadedExecutable_Destroy_Args);
    destroy.executable = executable;
    client->plugin->discard(client->plugin->api()->PJRT_LoadedExecutable_Destroy(&destroy));
  }
};

const BuildInfo& build_info() {
  static const BuildInfo info{true, PJRT_API_MAJOR, PJRT_API_MINOR, ""};
  return info;
}

std::string serialize_compile_options(const CompileOptions& options) {
  if (options.num_replicas < 1 || options.num_partitions < 1) {
    throw InvalidArgument(
        "xla::CompileOptions: num_replicas and num_partitions must be >= 1, got " +
        std::to_string(options.num_replicas) + " and " + std::to_string(options.num_partitions));
  }
  if (!options.replica_device_ids.empty() &&
      static_cast<std::int64_t>(options.replica_device_ids.size()) != options.num_replicas) {
    throw InvalidArgument(
        "xla::CompileOptions: " + std::to_string(options.replica_device_ids.size()) +
        " replica devices for " + std::to_string(options.num_replicas) +
        " replicas; give one device id per replica, or none");
  }
  proto::CompileOptionsProto message;
  proto::ExecutableBuildOptionsProto* build = message.mutable_executable_build_options();
  build->set_num_replicas(options.num_replicas);
  build->set_num_partitions(options.num_partitions);
  if (!options.replica_device_ids.empty()) {
    proto::DeviceAssignmentProto* assignment = build->mutable_device_assignment();
    assignment->set_replica_count(static_cast<std::int32_t>(options.num_replicas));
    assignment->set_computation_count(static_cast<std::int32_t>(options.num_partitions));
    // One computation (partition): its device for each replica.
    proto::DeviceAssignmentProto::ComputationDevice* devices =
        assignment->add_computation_devices();
    for (const std::int64_t id : options.replica_device_ids)
      devices->add_replica_device_ids(id);
  }
  return message.SerializeAsString();
}

Client::Client(const std::string& plugin_path, const std::vector<Option>& options)
    : impl_(std::make_shared<Impl>()) {
  const Plugin& plugin = load_plugin(plugin_path);
  impl_->plugin = &plugin;
  const PJRT_Api* api = plugin.api();
  std::vector<PJRT_NamedValue> values;
  for (const auto& [name, value] : options) {
    auto named = TANDEM_PJRT_ARGS(PJRT_NamedValue);
    named.name = name.c_str();
    named.name_size = name.size();
    named.value_size = 1;
    if (const auto* number = std::get_if<std::int64_t>(&value)) {
      named.type = PJRT_NamedValue_kInt64;
      named.int64_value = *number;
    } else if (const auto* flag = std::get_if<bool>(&value)) {
      named.type = PJRT_NamedValue_kBool;
      named.bool_value = *flag;
    } else {
      const std::string& text = std::get<std::string>(value);
      named.type = PJRT_NamedValue_kString;
      named.string_value = text.c_str();
      named.value_size = text.size();
    }
    values.push_back(named);
  }
  auto create = TANDEM_PJRT_ARGS(PJRT_Client_Create_Args);
  create.create_options = values.data();
  create.num_options = values.size();
  plugin.check(api->PJRT_Client_Create(&create), "PJRT_Client_Create");
  impl_->client = create.client;

  auto name = TANDEM_PJRT_ARGS(PJRT_Client_PlatformName_Args);
  name.client = impl_->client;
  plugin.check(api->PJRT_Client_PlatformName(&name), "PJRT_Client_PlatformName");
  impl_->platform = text_of(name.platform_name, name.platform_name_size);
  auto version = TANDEM_PJRT_ARGS(PJRT_Client_PlatformVersion_Args);
  version.client = impl_->client;
  plugin.check(api->PJRT_Client_PlatformVersion(&version), "PJRT_Client_PlatformVersion");
  impl_->platform_version = text_of(version.platform_version, version.platform_version_size);

  auto listed = TANDEM_PJRT_ARGS(PJRT_Client_AddressableDevices_Args);
  listed.client = impl_->client;
  plugin.check(api->PJRT_Client_AddressableDevices(&listed), "PJRT_Client_AddressableDevices");
  for (std::size_t i = 0; i < listed.num_addressable_devices; ++i) {
    PJRT_Device* device = listed.addressable_devices[i];
    auto describe = TANDEM_PJRT_ARGS(PJRT_Device_GetDescription_Args);
    describe.device = device;
    plugin.check(api->PJRT_Device_GetDescription(&describe), "PJRT_Device_GetDescription");
    auto id = TANDEM_PJRT_ARGS(PJRT_DeviceDescription_Id_Args);
    id.device_description = describe.device_description;
    plugin.check(api->PJRT_DeviceDescription_Id(&id), "PJRT_DeviceDescription_Id");
    auto kind = TANDEM_PJRT_ARGS(PJRT_DeviceDescription_Kind_Args);
    kind.device_description = describe.device_description;
    plugin.check(api->PJRT_DeviceDescription_Kind(&kind), "PJRT_DeviceDescription_Kind");
    auto debug = TANDEM_PJRT_ARGS(PJRT_DeviceDescription_DebugString_Args);
    debug.device_description = describe.device_description;
    plugin.check(api->PJRT_DeviceDescription_DebugString(&debug),
                 "PJRT_DeviceDescription_DebugString");
    impl_->handles.push_back(device);
    impl_->devices.push_back({id.id, text_of(kind.device_kind, kind.device_kind_size),
                              text_of(debug.debug_string, debug.debug_string_size)});
  }
}

Client::~Client() = default;

const PluginInfo& Client::plugin() const {
  return impl_->plugin->info();
}

const std::string& Client::platform() const {
  return impl_->platform;
}

const std::string& Client::platform_version() const {
  return impl_->platform_version;
}

const std::vector<DeviceInfo>& Client::devices() const {
  return impl_->devices;
}

namespace {

// `mlir` as the program PJRT compiles; it must outlive the program.
PJRT_Program mlir_program(const std::string& mlir) {
  auto program = TANDEM_PJRT_ARGS(PJRT_Program);
  program.code = const_cast<char*>(mlir.data());  // the C API takes it non-const, reads only
  program.code_size = mlir.size();
  static constexpr char kFormat[] = "mlir";
  program.format = kFormat;
  program.format_size = sizeof kFormat - 1;
  return program;
}

}  // namespace

std::int64_t compile_for_topology(const std::string& plugin_path, const std::string& topology,
                                  const std::string& mlir, const CompileOptions& options) {
  const Plugin& plugin = load_plugin(plugin_path);
  const PJRT_Api* api = plugin.api();
  auto create = TANDEM_PJRT_ARGS(PJRT_TopologyDescription_Create_Args);
  create.topology_name = topology.data();
  create.topology_name_size = topology.size();
  plugin.check(api->PJRT_TopologyDescription_Create(&create),
               "PJRT_TopologyDescription_Create(" + topology + ")");
  const std::unique_ptr<PJRT_TopologyDescription, std::function<void(PJRT_TopologyDescription*)>>
      described(create.topology, [api](PJRT_TopologyDescription* made) {
        auto destroy = TANDEM_PJRT_ARGS(PJRT_TopologyDescription_Destroy_Args);
        destroy.topology = made;
        if (PJRT_Error* error = api->PJRT_TopologyDescription_Destroy(&destroy)) {
          auto discard = TANDEM_PJRT_ARGS(PJRT_Error_Destroy_Args);
          discard.error = error;
          api->PJRT_Error_Destroy(&discard);
        }
      });
  const std::string compile_options = serialize_compile_options(options);
  const PJRT_Program program = mlir_program(mlir);
  auto compile = TANDEM_PJRT_ARGS(PJRT_Compile_Args);
  compile.topology = create.topology;
  compile.program = &program;
  compile.compile_options = compile_options.data();
  compile.compile_options_size = compile_options.size();
  plugin.check(api->PJRT_Compile(&compile), "PJRT_Compile(" + topology + ")",
               [&](const std::string& message) { return stablehlo_line(message, mlir); });
  auto size = TANDEM_PJRT_ARGS(PJRT_Executable_SizeOfGeneratedCodeInBytes_Args);
  size.executable = compile.executable;
  PJRT_Error* sized = api->PJRT_Executable_SizeOfGeneratedCodeInBytes(&size);
  auto destroy = TANDEM_PJRT_ARGS(PJRT_Executable_Destroy_Args);
  destroy.executable = compile.executable;
  PJRT_Error* destroyed = api->PJRT_Executable_Destroy(&destroy);
  plugin.check(sized, "PJRT_Executable_SizeOfGeneratedCodeInBytes");
  plugin.check(destroyed, "PJRT_Executable_Destroy");
  return size.size_in_bytes;
}

Executable Client::compile(const std::string& mlir, const CompileOptions& options) const {
  const Plugin& plugin = *impl_->plugin;
  const std::string compile_options = serialize_compile_options(options);
  const PJRT_Program program = mlir_program(mlir);
  auto compile = TANDEM_PJRT_ARGS(PJRT_Client_Compile_Args);
  compile.client = impl_->client;
  compile.program = &program;
  compile.compile_options = compile_options.data();
  compile.compile_options_size = compile_options.size();
  plugin.check(plugin.api()->PJRT_Client_Compile(&compile), "PJRT_Client_Compile",
               [&](const std::string& message) { return stablehlo_line(message, mlir); });
  auto impl = std::make_shared<Executable::Impl>();
  impl->client = impl_;
  impl->executable = compile.executable;
  impl->num_replicas = static_cast<std::size_t>(options.num_replicas);

  auto get = TANDEM_PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args);
  get.loaded_executable = impl->executable;
  plugin.check(plugin.api()->PJRT_LoadedExecutable_GetExecutable(&get),
               "PJRT_LoadedExecutable_GetExecutable");
  auto outputs = TANDEM_PJRT_ARGS(PJRT_Executable_NumOutputs_Args);
  outputs.executable = get.executable;
  PJRT_Error* counted = plugin.api()->PJRT_Executable_NumOutputs(&outputs);
  auto destroy = TANDEM_PJRT_ARGS(PJRT_Executable_Destroy_Args);
  destroy.executable = get.executable;
  PJRT_Error* destroyed = plugin.api()->PJRT_Executable_Destroy(&destroy);
  plugin.check(counted, "PJRT_Executable_NumOutputs");
  plugin.check(destroyed, "PJRT_Executable_Destroy");
  impl->num_outputs = outputs.num_outputs;
  return Executable(std::move(impl));
}

Buffer Client::to_device(const Tensor& host, int device) const {
  const Plugin& plugin = *impl_->plugin;
  if (device < 0 || device >= static_cast<int>(impl_->handles.size())) {
    throw InvalidArgument("xla::Client::to_device: no device " + std::to_string(device) + " on " +
                          plugin.info().path + ", which has " +
                          std::to_string(impl_->handles.size()));
  }
  if (host.device() != Device::cpu() || host.is_symbolic()) {
    throw InvalidArgument("xla::Client::to_device: give a CPU tensor with its values, got " +
                          shape_str(host.shape()) + " on " + host.device().str());
  }
  const std::vector<std::int64_t> dims(host.shape().begin(), host.shape().end());
  auto transfer = TANDEM_PJRT_ARGS(PJRT_Client_BufferFromHostBuffer_Args);
  transfer.client = impl_->client;
  transfer.data = host.raw_data();
  transfer.type = buffer_type(host.dtype());
  transfer.dims = dims.data();
  transfer.num_dims = dims.size();
  transfer.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
  transfer.device = impl_->handles[static_cast<std::size_t>(device)];
  plugin.check(plugin.api()->PJRT_Client_BufferFromHostBuffer(&transfer),
               "PJRT_Client_BufferFromHostBuffer");
  auto impl = std::make_shared<Buffer::Impl>();
  impl->client = impl_;
  impl->buffer = transfer.buffer;
  impl->shape = host.shape();
  impl->dtype = host.dtype();
  impl->device = device;
  // The host memory may be reused once the plugin is done with it.
  plugin.await(transfer.done_with_host_buffer, "the transfer to the device");
  return Buffer(std::move(impl));
}

Tensor Buffer::to_host() const {
  Tensor host = Tensor::empty(impl_->shape, impl_->dtype);
  copy_to_host(host);
  return host;
}

void Buffer::copy_to_host(const Tensor& destination) const {
  if (!destination.defined() || destination.device().type != DeviceType::cpu ||
      destination.shape() != impl_->shape || destination.dtype() != impl_->dtype) {
    throw InvalidArgument("xla::Buffer::copy_to_host: the buffer is " + shape_str(impl_->shape) +
                          " " + dtype_name(impl_->dtype) + ", the destination " +
                          (destination.defined() ? shape_str(destination.shape()) + " " +
                                                       dtype_name(destination.dtype()) + " on " +
                                                       destination.device().str()
                                                 : std::string("undefined")) +
                          "; give a CPU tensor of the buffer's shape and dtype");
  }
  const Plugin& plugin = *impl_->client->plugin;
  auto copy = TANDEM_PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args);
  copy.src = impl_->buffer;
  copy.dst = destination.raw_data();
  copy.dst_size = destination.nbytes();
  plugin.check(plugin.api()->PJRT_Buffer_ToHostBuffer(&copy), "PJRT_Buffer_ToHostBuffer");
  plugin.await(copy.event, "the transfer to the host");
}

const Shape& Buffer::shape() const {
  return impl_->shape;
}

DType Buffer::dtype() const {
  return impl_->dtype;
}

int Buffer::device() const {
  return impl_->device;
}

std::size_t Executable::num_outputs() const {
  return impl_->num_outputs;
}

std::vector<Buffer> Executable::execute(const std::vector<const Buffer*>& arguments) const {
  std::vector<std::vector<Buffer>> outputs = execute_replicas({arguments});
  return std::move(outputs.front());
}

std::vector<std::vector<Buffer>> Executable::execute_replicas(
    const std::vector<std::vector<const Buffer*>>& arguments) const {
  const Plugin& plugin = *impl_->client->plugin;
  const std::size_t devices = arguments.size();
  if (devices != impl_->num_replicas) {
    throw InvalidArgument("xla::Executable::execute: " + std::to_string(devices) +
                          " argument lists for a program compiled for " +
                          std::to_string(impl_->num_replicas) + " replicas");
  }
  const std::size_t count = arguments.front().size();
  std::vector<std::vector<PJRT_Buffer*>> inputs(devices);
  std::vector<PJRT_Buffer* const*> input_lists;
  for (std::size_t replica = 0; replica < devices; ++replica) {
    if (arguments[replica].size() != count) {
      throw InvalidArgument("xla::Executable::execute: replica " + std::to_string(replica) +
                            " has " + std::to_string(arguments[replica].size()) +
                            " arguments, replica 0 " + std::to_string(count));
    }
    for (const Buffer* buffer : arguments[replica])
      inputs[replica].push_back(buffer->impl_->buffer);
    input_lists.push_back(inputs[replica].data());
  }
  std::vector<std::vector<PJRT_Buffer*>> outputs(devices,
                                                 std::vector<PJRT_Buffer*>(impl_->num_outputs));
  std::vector<PJRT_Buffer**> output_lists;
  for (std::vector<PJRT_Buffer*>& list : outputs)
    output_lists.push_back(list.data());
  std::vector<PJRT_Event*> done(devices, nullptr);
  // Options are required: a null pointer crashes XLA:CPU rather than meaning "the defaults".
  auto options = TANDEM_PJRT_ARGS(PJRT_ExecuteOptions);
  auto execute = TANDEM_PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args);
  execute.executable = impl_->executable;
  execute.options = &options;
  execute.argument_lists = input_lists.data();
  execute.num_devices = devices;
  execute.num_args = count;
  execute.output_lists = output_lists.data();
  execute.device_complete_events = done.data();
  plugin.check(plugin.api()->PJRT_LoadedExecutable_Execute(&execute),
               "PJRT_LoadedExecutable_Execute");
  // Owners first, so that every output is freed whatever a later call throws.
  std::vector<std::vector<std::shared_ptr<Buffer::Impl>>> owned(devices);
  for (std::size_t replica = 0; replica < devices; ++replica) {
    for (PJRT_Buffer* output : outputs[replica])
      owned[replica].push_back(Buffer::Impl::own(impl_->client, output));
  }
  // Every event awaited and destroyed before the first failure is thrown (as its own type: an
  // out-of-memory stays one).
  std::exception_ptr failed;
  for (PJRT_Event* event : done) {
    try {
      plugin.await(event, "the execution");
    } catch (const PjrtError&) {
      if (!failed) failed = std::current_exception();
    }
  }
  if (failed) std::rethrow_exception(failed);
  std::vector<std::vector<Buffer>> results(devices);
  for (std::size_t replica = 0; replica < devices; ++replica) {
    for (std::shared_ptr<Buffer::Impl>& output : owned[replica]) {
      output->describe();
      results[replica].push_back(Buffer(std::move(output)));
    }
  }
  return results;
}

}  // namespace tandem::xla
