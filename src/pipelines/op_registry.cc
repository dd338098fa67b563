// The process-wide registry of custom ops (docs/custom_ops.md), their
// planning, and loading them from shared libraries.
#include "feedline/op_registry.h"

#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace feedline {

// What a library of ops hands the process that loads it: the ops it
// registered in its own copy of the registry (a library linked with
// feedline statically has one), and its failed static registrations.
struct OpTable {
  std::vector<std::pair<std::string, OpFactory>> ops;
  std::vector<Status> errors;
};

namespace {

// Changes when the types an op shares with its host change size: a library
// built against other headers is refused rather than run.
constexpr uint64_t kOpAbi = (uint64_t{1} << 48) ^ (uint64_t{sizeof(Sample)} << 32) ^
                            (uint64_t{sizeof(FieldSpec)} << 16) ^ (sizeof(OpContext) << 4) ^
                            sizeof(Status);

class Registry {
 public:
  Status Add(std::string name, OpFactory factory) {
    if (name.empty()) return InvalidArgumentError("RegisterOp: an op needs a name");
    if (!factory) return InvalidArgumentError("RegisterOp: op '" + name + "' has no factory");
    std::lock_guard<std::mutex> lock(mu_);
    if (ops_.contains(name)) {
      return Status(StatusCode::kAlreadyExists,
                    "RegisterOp: an op named '" + name + "' is registered already");
    }
    ops_.emplace(std::move(name), std::move(factory));
    return Status::OK();
  }
  // Adds all of `table` or nothing.
  Status AddAll(const OpTable& table, const std::string& library) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, factory] : table.ops) {
      if (ops_.contains(name)) {
        return Status(StatusCode::kAlreadyExists, "LoadOps: '" + library + "' registers op '" +
                                                      name + "', which is registered already");
      }
    }
    for (const auto& [name, factory] : table.ops) ops_.emplace(name, factory);
    return Status::OK();
  }
  OpFactory Find(std::string_view name) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ops_.find(name);
    return it == ops_.end() ? OpFactory() : it->second;
  }
  std::vector<std::string> Names() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& [name, factory] : ops_) out.push_back(name);
    return out;  // sorted: a std::map
  }
  void Fail(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    errors_.push_back(std::move(s));
  }
  OpTable Table() const {
    std::lock_guard<std::mutex> lock(mu_);
    OpTable t;
    t.ops.assign(ops_.begin(), ops_.end());
    t.errors = errors_;
    return t;
  }
  std::vector<Status> Errors() const {
    std::lock_guard<std::mutex> lock(mu_);
    return errors_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, OpFactory, std::less<>> ops_;  // guarded by mu_
  std::vector<Status> errors_;                         // guarded by mu_
};

// Internal linkage on purpose: a library of ops linked with feedline has
// its own copy, which LoadOps reads through feedline_op_table_v1.
Registry& TheRegistry() {
  static Registry* r = new Registry();  // never destroyed: static registrations may outlive main
  return *r;
}

std::string Names(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return s.empty() ? "none" : s;
}

}  // namespace

}  // namespace feedline

// The entry points LoadOps looks up in a library (C names: no mangling to
// agree on). Every binary linked with feedline has them.
extern "C" FEEDLINE_EXPORT uint64_t feedline_op_abi_v1() { return feedline::kOpAbi; }
extern "C" FEEDLINE_EXPORT void feedline_op_table_v1(feedline::OpTable* out, const void** id) {
  *out = feedline::TheRegistry().Table();
  *id = &feedline::TheRegistry();
}

namespace feedline {

Result<int64_t> OpContext::IntParam(std::string_view key, int64_t fallback, int64_t min,
                                    int64_t max) const {
  auto it = params.find(key);
  if (it == params.end()) return fallback;
  const std::string& v = it->second;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || end == nullptr || *end != '\0' || errno == ERANGE) {
    return InvalidArgumentError("parameter '" + std::string(key) + "' must be an integer, got '" +
                                v + "'");
  }
  if (x < min || x > max) {
    return InvalidArgumentError("parameter '" + std::string(key) + "' is " + v + ", outside [" +
                                std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return static_cast<int64_t>(x);
}

Result<double> OpContext::DoubleParam(std::string_view key, double fallback) const {
  auto it = params.find(key);
  if (it == params.end()) return fallback;
  const std::string& v = it->second;
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || end == nullptr || *end != '\0' || errno == ERANGE) {
    return InvalidArgumentError("parameter '" + std::string(key) + "' must be a number, got '" + v +
                                "'");
  }
  return x;
}

std::string OpContext::StringParam(std::string_view key, std::string_view fallback) const {
  auto it = params.find(key);
  return it == params.end() ? std::string(fallback) : it->second;
}

Status OpContext::CheckParams(std::initializer_list<std::string_view> known) const {
  for (const auto& [key, value] : params) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string k;
      for (std::string_view n : known) k += (k.empty() ? "'" : ", '") + std::string(n) + "'";
      return InvalidArgumentError("unknown parameter '" + key + "' (it takes " +
                                  (k.empty() ? std::string("none") : k) + ")");
    }
  }
  return Status::OK();
}

const Sample::Part* CustomOp::FindInput(const Sample& sample) const {
  for (const std::string& name : context_.parts) {
    if (const Sample::Part* p = sample.FindPart(name)) return p;
  }
  return nullptr;
}

Status CustomOp::MissingInput(const Sample& sample) const {
  std::string has;
  for (const Sample::Part& p : sample.parts()) has += (has.empty() ? "'" : ", '") + p.name + "'";
  return NotFoundError("field '" + context_.field + "' (op '" + context_.op +
                       "'): the sample has no " + Names(context_.parts) + " part (it has " +
                       (has.empty() ? std::string("none") : has) + ")");
}

Status RegisterOp(std::string name, OpFactory factory) {
  return TheRegistry().Add(std::move(name), std::move(factory));
}

Result<std::unique_ptr<CustomOp>> NewOp(std::string_view name) {
  OpFactory f = TheRegistry().Find(name);
  if (!f) {
    return NotFoundError("no op named '" + std::string(name) +
                         "' is registered (registered: " + Names(RegisteredOps()) + ")");
  }
  std::unique_ptr<CustomOp> op = f();
  if (op == nullptr)
    return InternalError("the factory of op '" + std::string(name) + "' gave null");
  return op;
}

std::vector<std::string> RegisteredOps() { return TheRegistry().Names(); }

std::vector<Status> RegistrationErrors() { return TheRegistry().Errors(); }

OpRegistration::OpRegistration(std::string name, OpFactory factory)
    : status_(RegisterOp(std::move(name), std::move(factory))) {
  if (!status_.ok()) TheRegistry().Fail(status_);
}

class OpPlanner {
 public:
  static Result<PlannedOp> Plan(OpContext context) {
    const std::string where = "op '" + context.op + "' for field '" + context.field + "'";
    Result<std::unique_ptr<CustomOp>> made = NewOp(context.op);
    if (!made.ok()) return made.status().WithContext(where);
    std::unique_ptr<CustomOp> op = *std::move(made);
    op->label_ = context.op + ":" + context.field;
    const std::string field = context.field;
    op->context_ = std::move(context);
    Result<std::vector<FieldSpec>> outputs = op->Plan(op->context_);
    if (!outputs.ok()) return outputs.status().WithContext(where);
    if (outputs->empty()) return InvalidArgumentError(where + ": Plan declared no output");
    for (const FieldSpec& f : *outputs) {
      const bool named = outputs->size() == 1
                             ? f.name == field
                             : f.name.size() > field.size() + 1 && f.name.starts_with(field + ".");
      if (!named) {
        return InvalidArgumentError(where + ": output '" + f.name + "' must be named " +
                                    (outputs->size() == 1
                                         ? "'" + field + "'"
                                         : "'" + field + ".<name>' (the op has several)"));
      }
      if (f.kind == FieldKind::kTensor && f.SampleBytes() == 0) {
        return InvalidArgumentError(where + ": output '" + f.name +
                                    "' is a tensor with a dimension that is not positive");
      }
    }
    PlannedOp planned;
    planned.outputs = *std::move(outputs);
    planned.op = std::move(op);
    return planned;
  }
};

Result<PlannedOp> PlanOp(OpContext context) { return OpPlanner::Plan(std::move(context)); }

Result<std::vector<std::string>> LoadOps(const std::string& path) {
  // RTLD_LOCAL: the library's copy of feedline stays its own (its calls do
  // not bind to ours, nor ours to it); only its table is read.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    // glibc keeps dlerror's message per thread.
    const char* why = ::dlerror();  // NOLINT(concurrency-mt-unsafe)
    return NotFoundError("LoadOps: cannot load '" + path + "': " + (why ? why : "dlopen failed"));
  }
  // Never dlclose: the ops' code and vtables must outlive every pipeline.
  using AbiFn = uint64_t (*)();
  using TableFn = void (*)(OpTable*, const void**);
  auto abi = reinterpret_cast<AbiFn>(::dlsym(handle, "feedline_op_abi_v1"));
  auto table_fn = reinterpret_cast<TableFn>(::dlsym(handle, "feedline_op_table_v1"));
  if (abi == nullptr || table_fn == nullptr) {
    return FailedPreconditionError("LoadOps: '" + path +
                                   "' has no op registry (link it with feedline)");
  }
  if (abi() != kOpAbi) {
    return FailedPreconditionError(
        "LoadOps: '" + path + "' was built against other feedline headers (ABI tag " +
        std::to_string(abi()) + ", this one " + std::to_string(kOpAbi) + "); rebuild it");
  }
  OpTable table;
  const void* id = nullptr;
  table_fn(&table, &id);
  if (!table.errors.empty()) return table.errors.front().WithContext("LoadOps: '" + path + "'");
  std::vector<std::string> names;
  if (id == &TheRegistry()) {
    // The library shares this process's registry (feedline linked as a
    // shared library): its registrations are here already.
    return RegisteredOps();
  }
  FEEDLINE_RETURN_IF_ERROR(TheRegistry().AddAll(table, path));
  for (const auto& [name, factory] : table.ops) names.push_back(name);
  return names;
}

}  // namespace feedline
