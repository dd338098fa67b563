// The custom op registry (include/feedline/op_registry.h): registering,
// refusing duplicates (also under concurrency), looking up, planning with
// errors that name the op and the field, and a registered op in a kFields
// pipeline over a tar. The example ops (examples/custom_op) have their own
// end-to-end test.
#include "feedline/op_registry.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "feedline/loader.h"
#include "feedline/pipeline_builder.h"
#include "feedline/source.h"
#include "gtest/gtest.h"
#include "tests/io/tar_writer.h"

namespace feedline {
namespace {

namespace fs = std::filesystem;

bool Contains(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string_view::npos;
}

// The length of a part in int64 field "<field>.length" and its first byte
// in "<field>.first" (two outputs); param "scale" multiplies the length.
class PartLength final : public CustomOp {
 public:
  Result<std::vector<FieldSpec>> Plan(const OpContext& c) override {
    FEEDLINE_RETURN_IF_ERROR(c.CheckParams({"scale", "rename"}));
    FEEDLINE_ASSIGN_OR_RETURN(scale_, c.IntParam("scale", 1, 1, 1000));
    upstream_ = c.upstream.size();
    const std::string length = c.StringParam("rename", c.field + ".length");
    return std::vector<FieldSpec>{{length, DType::kInt64, {}},
                                  {c.field + ".first", DType::kInt64, {}}};
  }
  Status Apply(Sample& s, OpState* /*state*/) const override {
    const Sample::Part* p = FindInput(s);
    if (p == nullptr) return MissingInput(s);
    *s.output_as<int64_t>(output_index(0)) = scale_ * static_cast<int64_t>(p->data.size());
    *s.output_as<int64_t>(output_index(1)) = p->data.empty() ? -1 : p->data[0];
    return Status::OK();
  }
  size_t upstream() const { return upstream_; }

 private:
  int64_t scale_ = 1;
  size_t upstream_ = 0;
};

// Declares what it is told to, for the output checks.
class Declares final : public CustomOp {
 public:
  Result<std::vector<FieldSpec>> Plan(const OpContext& c) override {
    const std::string what = c.StringParam("what", "");
    if (what == "none") return std::vector<FieldSpec>{};
    if (what == "misnamed") return std::vector<FieldSpec>{{"other", DType::kInt64, {}}};
    if (what == "zero") return std::vector<FieldSpec>{{c.field, DType::kInt64, {0}}};
    return InvalidArgumentError("what?");
  }
  Status Apply(Sample& /*s*/, OpState* /*state*/) const override { return Status::OK(); }
};

const OpRegistration kPartLength("test_part_length", [] { return std::make_unique<PartLength>(); });
FEEDLINE_REGISTER_OP("test_declares", Declares);
// A second static registration of a taken name: kept as a failure.
const OpRegistration kDuplicate("test_declares", [] { return std::make_unique<Declares>(); });

TEST(OpRegistryTest, StaticRegistrationsAreListedAndADuplicateIsKeptAsAnError) {
  const std::vector<std::string> names = RegisteredOps();
  EXPECT_NE(std::find(names.begin(), names.end(), "test_part_length"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "test_declares"), names.end());
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_TRUE(kPartLength.status().ok());
  ASSERT_FALSE(kDuplicate.status().ok());
  EXPECT_EQ(kDuplicate.status().code(), StatusCode::kAlreadyExists);
  const std::vector<Status> errors = RegistrationErrors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(Contains(errors[0], "an op named 'test_declares' is registered already"))
      << errors[0];
}

TEST(OpRegistryTest, RegisterLooksUpAndRefusesDuplicatesAndEmptyNames) {
  ASSERT_TRUE(RegisterOp("test_lookup", [] { return std::make_unique<Declares>(); }).ok());
  auto op = NewOp("test_lookup");
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_NE(*op, nullptr);
  const Status dup = RegisterOp("test_lookup", [] { return std::make_unique<PartLength>(); });
  EXPECT_EQ(dup.code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(Contains(dup, "'test_lookup'")) << dup;
  EXPECT_EQ(RegisterOp("", [] { return std::make_unique<Declares>(); }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RegisterOp("test_null", nullptr).code(), StatusCode::kInvalidArgument);
  auto unknown = NewOp("no_such_op");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(unknown.status(), "no op named 'no_such_op'")) << unknown.status();
  EXPECT_TRUE(Contains(unknown.status(), "'test_part_length'")) << unknown.status();
}

TEST(OpRegistryTest, ConcurrentRegistrationsOfOneNameLetExactlyOneWin) {
  for (int round = 0; round < 20; ++round) {
    const std::string name = "test_race_" + std::to_string(round);
    std::atomic<int> won{0}, refused{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        // Each thread also registers a name of its own and looks names up.
        const Status mine =
            RegisterOp(name + "_" + std::to_string(t), [] { return std::make_unique<Declares>(); });
        EXPECT_TRUE(mine.ok()) << mine;
        const Status s = RegisterOp(name, [] { return std::make_unique<Declares>(); });
        (s.ok() ? won : refused).fetch_add(1);
        EXPECT_TRUE(s.ok() || s.code() == StatusCode::kAlreadyExists) << s;
        EXPECT_TRUE(NewOp("test_part_length").ok());
        EXPECT_FALSE(RegisteredOps().empty());
      });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(won.load(), 1) << name;
    EXPECT_EQ(refused.load(), 7) << name;
    for (int t = 0; t < 8; ++t) EXPECT_TRUE(NewOp(name + "_" + std::to_string(t)).ok());
  }
}

OpContext Context(std::string op, std::string field, OpParams params = {}) {
  OpContext c;
  c.op = std::move(op);
  c.field = std::move(field);
  c.parts = {"bin"};
  c.params = std::move(params);
  return c;
}

TEST(OpRegistryTest, PlanErrorsNameTheOpTheFieldAndTheReason) {
  auto unknown = PlanOp(Context("no_such_op", "f"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(unknown.status(), "op 'no_such_op' for field 'f': no op named"))
      << unknown.status();

  auto not_int = PlanOp(Context("test_part_length", "f", {{"scale", "2x"}}));
  ASSERT_FALSE(not_int.ok());
  EXPECT_EQ(not_int.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(not_int.status(),
                       "op 'test_part_length' for field 'f': parameter 'scale' must be an "
                       "integer, got '2x'"))
      << not_int.status();
  auto range = PlanOp(Context("test_part_length", "f", {{"scale", "0"}}));
  EXPECT_TRUE(Contains(range.status(), "'scale' is 0, outside [1, 1000]")) << range.status();
  auto extra = PlanOp(Context("test_part_length", "f", {{"sclae", "2"}}));
  EXPECT_TRUE(Contains(extra.status(), "unknown parameter 'sclae' (it takes 'scale', 'rename')"))
      << extra.status();

  // Outputs must follow the naming rule and have a size.
  auto misnamed = PlanOp(Context("test_declares", "f", {{"what", "misnamed"}}));
  EXPECT_TRUE(Contains(misnamed.status(), "output 'other' must be named 'f'")) << misnamed.status();
  auto several = PlanOp(Context("test_part_length", "f", {{"rename", "g"}}));
  EXPECT_TRUE(Contains(several.status(), "output 'g' must be named 'f.<name>'"))
      << several.status();
  auto none = PlanOp(Context("test_declares", "f", {{"what", "none"}}));
  EXPECT_TRUE(Contains(none.status(), "Plan declared no output")) << none.status();
  auto zero = PlanOp(Context("test_declares", "f", {{"what", "zero"}}));
  EXPECT_TRUE(Contains(zero.status(), "not positive")) << zero.status();

  auto good = PlanOp(Context("test_part_length", "f", {{"scale", "3"}}));
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_EQ(good->outputs.size(), 2u);
  EXPECT_EQ(good->outputs[0].name, "f.length");
  EXPECT_EQ(good->op->name(), "test_part_length:f");
}

class OpPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("feedline_op_registry_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

FieldRequest OpField(std::string name, std::string op, OpParams params = {}) {
  FieldRequest r;
  r.name = std::move(name);
  r.kind = FieldRequest::Kind::kOp;
  r.op = std::move(op);
  r.parts = {"bin"};
  r.params = std::move(params);
  return r;
}

TEST_F(OpPipelineTest, ARegisteredOpFillsItsFieldsAfterTheOthers) {
  testing::TarWriter tar;
  for (int i = 0; i < 9; ++i) {
    tar.Add("k" + std::to_string(i) + ".cls", std::to_string(i));
    tar.Add("k" + std::to_string(i) + ".bin", std::string(static_cast<size_t>(i), char('a' + i)));
  }
  const std::string path = (dir_ / "d.tar").string();
  std::ofstream(path, std::ios::binary) << tar.Finish();
  SourceOptions so;
  so.parts = true;
  auto source = OpenSource(path, so);
  ASSERT_TRUE(source.ok()) << source.status();

  FieldRequest label;
  label.name = "label";
  label.kind = FieldRequest::Kind::kLabel;
  SampleSpec spec;
  spec.output = SampleSpec::Output::kFields;
  spec.fields = {label, OpField("len", "test_part_length", {{"scale", "10"}})};
  auto pipeline = BuildPipeline(*source, spec);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  ASSERT_EQ(pipeline->fields.size(), 3u);
  EXPECT_EQ(pipeline->fields[1].name, "len.length");
  EXPECT_EQ(pipeline->fields[2].name, "len.first");
  ASSERT_EQ(pipeline->ops.size(), 3u);  // read, label, the op
  EXPECT_EQ(static_cast<const PartLength&>(*pipeline->ops[2]).upstream(), 1u);

  LoaderOptions o;
  o.batch_size = 4;
  o.num_threads = 2;
  auto loader = Loader::Create(*std::move(pipeline), o);
  ASSERT_TRUE(loader.ok()) << loader.status();
  size_t seen = 0;
  while (true) {
    Batch b;
    bool end = false;
    ASSERT_TRUE((*loader)->Next(&b, &end).ok());
    if (end) break;
    for (size_t k = 0; k < b.size(); ++k, ++seen) {
      const int64_t i = b.field_as<int64_t>(0)[k];
      EXPECT_EQ(b.field_as<int64_t>(1)[k], 10 * i);
      EXPECT_EQ(b.field_as<int64_t>(2)[k], i == 0 ? -1 : 'a' + i);
    }
  }
  EXPECT_EQ(seen, 9u);

  // BuildPipeline's own checks: no parts, an output that takes another
  // field's name, an unknown op; each names the field and the op.
  FieldRequest no_parts = OpField("x", "test_part_length");
  no_parts.parts.clear();
  spec.fields = {no_parts};
  auto a = BuildPipeline(*source, spec);
  EXPECT_TRUE(Contains(a.status(), "op field 'x' needs the parts it is read from")) << a.status();
  FieldRequest clash = label;
  clash.name = "len.first";
  spec.fields = {clash, OpField("len", "test_part_length")};
  auto c = BuildPipeline(*source, spec);
  EXPECT_TRUE(Contains(c.status(), "output 'len.first' is the name of another field"))
      << c.status();
  spec.fields = {OpField("y", "no_such_op")};
  auto u = BuildPipeline(*source, spec);
  EXPECT_EQ(u.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(u.status(), "BuildPipeline: op 'no_such_op' for field 'y'")) << u.status();
}

TEST(LoadOpsTest, AMissingFileOrALibraryWithoutOpsIsRefusedNamingIt) {
  auto missing = LoadOps("/nonexistent/libnothing.so");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(missing.status(), "cannot load '/nonexistent/libnothing.so'"));
  // libm is a real shared library with no feedline registry.
  auto no_registry = LoadOps("libm.so.6");
  ASSERT_FALSE(no_registry.ok());
  EXPECT_EQ(no_registry.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(no_registry.status(), "has no op registry")) << no_registry.status();
}

}  // namespace
}  // namespace feedline
