// Writing your own op on a sample's fields, and registering it by name
// (docs/custom_ops.md).
//
// A registered op is planned once, when a pipeline is built, then run on
// every sample:
//   - Plan(context): told which field it fills, the sample parts it reads,
//     its string parameters and the fields planned before it, it checks
//     them and returns the FieldSpec(s) it will fill, or an error;
//   - Apply(sample, state): SampleOp's per-sample call (sample.h), const and
//     safe for concurrent use.
// A FieldRequest of kind kOp names the op and its parameters
// (pipeline_builder.h); BuildPipeline looks it up here, plans it and
// appends it.
//
//   class MaskFraction : public feedline::CustomOp {
//     feedline::Result<std::vector<feedline::FieldSpec>> Plan(
//         const feedline::OpContext& c) override { ... }
//     feedline::Status Apply(feedline::Sample& s, feedline::OpState*) const override { ... }
//   };
//   FEEDLINE_REGISTER_OP("mask_fraction", MaskFraction);
//
// Thread safety: the registry functions are safe for concurrent use. A
// CustomOp is planned on one thread, before any Apply; after that it is a
// SampleOp (Apply const and safe for concurrent use).
#ifndef FEEDLINE_OP_REGISTRY_H_
#define FEEDLINE_OP_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "feedline/buffer.h"
#include "feedline/export.h"
#include "feedline/sample.h"
#include "feedline/status.h"

namespace feedline {

// An op's parameters, as the user wrote them ("threshold" -> "128").
using OpParams = std::map<std::string, std::string, std::less<>>;

// What a registered op is planned with.
struct FEEDLINE_EXPORT OpContext {
  std::string op;                  // the name it was registered under
  std::string field;               // the requested field's name
  std::vector<std::string> parts;  // the sample parts it may read, in order of preference
  OpParams params;
  // The fields planned before this op's, in the order of the batch.
  std::vector<FieldSpec> upstream;
  // The batch index of the op's first output: output k is sample.output(first_output + k).
  size_t first_output = 0;
  // The source gives one image and a label per sample (folders, shards).
  bool source_has_labels = false;

  // Parameter readers: the value of `key`, or `fallback` when it is not
  // given; InvalidArgument naming the parameter and its value when it does
  // not parse or lies outside [min, max].
  Result<int64_t> IntParam(std::string_view key, int64_t fallback, int64_t min = INT64_MIN,
                           int64_t max = INT64_MAX) const;
  Result<double> DoubleParam(std::string_view key, double fallback) const;
  std::string StringParam(std::string_view key, std::string_view fallback) const;
  // InvalidArgument naming the first parameter not in `known` (and the
  // known ones): a misspelt parameter is an error, not a silent default.
  Status CheckParams(std::initializer_list<std::string_view> known) const;
};

// Base of a registered op. Derive, implement Plan and Apply (and, as for any
// SampleOp, NewState / ConfigFingerprint when you need them).
class FEEDLINE_EXPORT CustomOp : public SampleOp {
 public:
  // Checks the context and returns the fields this op fills, at least one:
  // a single output is named context.field; several are named
  // "<field>.<anything>". Errors (a bad parameter, a missing input part)
  // are returned as they are; BuildPipeline adds the field and op names.
  // Keep what Apply needs (parsed parameters, output indices) in members.
  virtual Result<std::vector<FieldSpec>> Plan(const OpContext& context) = 0;

  // "<op>:<field>", set before Plan; used in metrics and sample errors.
  std::string_view name() const final { return label_; }
  // The context Plan was given.
  const OpContext& context() const { return context_; }

 protected:
  // Helpers for Apply: the first of context().parts the sample has, or
  // null; and the NotFound a missing input should return (naming the
  // field, the op, the parts looked for and the parts the sample has).
  const Sample::Part* FindInput(const Sample& sample) const;
  Status MissingInput(const Sample& sample) const;
  // The batch index of output k.
  size_t output_index(size_t k = 0) const { return context_.first_output + k; }

 private:
  friend class OpPlanner;
  std::string label_;
  OpContext context_;
};

// Makes a fresh, unplanned op; called once per pipeline built.
using OpFactory = std::function<std::unique_ptr<CustomOp>()>;

// Adds `factory` under `name` to the process-wide registry. AlreadyExists
// if the name is taken (the first registration stays), InvalidArgument for
// an empty name or a null factory.
FEEDLINE_EXPORT Status RegisterOp(std::string name, OpFactory factory);
// A fresh op registered as `name`; NotFound naming the registered ones.
FEEDLINE_EXPORT Result<std::unique_ptr<CustomOp>> NewOp(std::string_view name);
// The registered names, sorted.
FEEDLINE_EXPORT std::vector<std::string> RegisteredOps();

// A planned op: its outputs and the op itself. Errors: InvalidArgument /
// NotFound prefixed "op '<op>' for field '<field>'": an unknown op, or what
// Plan returned (a bad parameter, a missing input), or outputs that break
// the naming rule above.
struct FEEDLINE_EXPORT PlannedOp {
  std::vector<FieldSpec> outputs;
  std::shared_ptr<const SampleOp> op;
};
FEEDLINE_EXPORT Result<PlannedOp> PlanOp(OpContext context);

// Loads a shared library of ops (built against these headers and linked
// with feedline, as examples/custom_op is) and adds the ops it registered
// to this process's registry. Returns their names. Errors: NotFound when
// dlopen fails (with dlerror's text), FailedPrecondition for a library
// built against other feedline headers or with no registry, AlreadyExists
// naming an op that is registered already (nothing from the library is
// added then). The library stays loaded for the process's life.
FEEDLINE_EXPORT Result<std::vector<std::string>> LoadOps(const std::string& path);

// Static registration: an object whose constructor registers an op, for
// FEEDLINE_REGISTER_OP at namespace scope. A failure (a duplicate name) is
// kept in status() and in RegistrationErrors(), never thrown or aborted on.
class FEEDLINE_EXPORT OpRegistration {
 public:
  OpRegistration(std::string name, OpFactory factory);
  const Status& status() const { return status_; }

 private:
  Status status_;
};
// Static registrations that failed in this process (LoadOps reports a
// library's own).
FEEDLINE_EXPORT std::vector<Status> RegistrationErrors();

#define FEEDLINE_REGISTER_OP_CONCAT_INNER_(a, b) a##b
#define FEEDLINE_REGISTER_OP_CONCAT_(a, b) FEEDLINE_REGISTER_OP_CONCAT_INNER_(a, b)
// FEEDLINE_REGISTER_OP("name", Class): registers Class (default
// constructible, derived from CustomOp) under "name" at load time.
#define FEEDLINE_REGISTER_OP(name, Class)                                                         \
  static const ::feedline::OpRegistration FEEDLINE_REGISTER_OP_CONCAT_(feedline_op_registration_, \
                                                                       __COUNTER__)(              \
      name, []() -> std::unique_ptr<::feedline::CustomOp> { return std::make_unique<Class>(); })

}  // namespace feedline

#endif  // FEEDLINE_OP_REGISTRY_H_
