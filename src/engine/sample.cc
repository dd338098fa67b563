#include "feedline/sample.h"

#include <string>
#include <utility>

#include "src/engine/detail/scratch_gate.h"

namespace feedline {

std::string SampleLocation::ToString() const {
  std::string s;
  auto add = [&s](const std::string& part) {
    if (!s.empty()) s += ", ";
    s += part;
  };
  if (!file.empty()) add("file '" + file + "'");
  if (record >= 0) add("record " + std::to_string(record));
  if (offset >= 0) add("offset " + std::to_string(offset));
  if (!key.empty()) add("key '" + key + "'");
  return s;
}

Status Sample::ChargeScratch(uint64_t bytes, std::string_view what) {
  if (gate_ != nullptr) {
    FEEDLINE_RETURN_IF_ERROR(gate_->Charge(charged_scratch_, bytes, what, &holds_allowance_));
  }
  charged_scratch_ += bytes;
  return Status::OK();
}

void Sample::AddPart(std::string_view name, std::span<const uint8_t> data) {
  // Reuses the slots (and their names' capacity) of earlier samples.
  if (num_parts_ == parts_.size()) parts_.emplace_back();
  Part& p = parts_[num_parts_++];
  p.name.assign(name);
  p.data = data;
}

const Sample::Part* Sample::FindPart(std::string_view name) const {
  for (size_t i = 0; i < num_parts_; ++i) {
    if (parts_[i].name == name) return &parts_[i];
  }
  return nullptr;
}

void SampleLocation::Clear() {
  file.clear();
  record = -1;
  offset = -1;
  key.clear();
}

namespace {

class FunctionOp final : public SampleOp {
 public:
  FunctionOp(std::string name, std::function<Status(Sample&)> fn)
      : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string_view name() const override { return name_; }
  Status Apply(Sample& sample, OpState* /*state*/) const override { return fn_(sample); }

 private:
  std::string name_;
  std::function<Status(Sample&)> fn_;
};

}  // namespace

std::shared_ptr<const SampleOp> MakeOp(std::string name, std::function<Status(Sample&)> fn) {
  return std::make_shared<FunctionOp>(std::move(name), std::move(fn));
}

}  // namespace feedline
