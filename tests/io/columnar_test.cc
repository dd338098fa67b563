// Parquet and Arrow IPC sources (include/feedline/columnar.h): files written
// here with Arrow C++'s own writers, read back through ColumnarDataset and
// through a real Loader; damaged files name their place.
#include "feedline/columnar.h"

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/ipc/writer.h>
#include <arrow/util/key_value_metadata.h>
#include <gtest/gtest.h>
#include <parquet/arrow/writer.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "feedline/batch.h"
#include "feedline/loader.h"
#include "feedline/raw_ops.h"
#include "feedline/sampler.h"
#include "feedline/source.h"

namespace feedline {
namespace {

namespace fs = std::filesystem;

// Row r's image bytes: deterministic, of a length that varies.
std::string ImageBytes(int r) {
  std::string s(static_cast<size_t>(40 + (r * 37) % 200), '\0');
  for (size_t i = 0; i < s.size(); ++i)
    s[i] = static_cast<char>((r * 131 + static_cast<int>(i) * 7) & 0xff);
  return s;
}

struct Rows {
  int first = 0, count = 0;
  bool null_image_at = false;  // row `null_row` has a null bytes
  int null_row = -1;
};

// A Hub-layout table: image {bytes, path}, label int64, caption string,
// emb list<float> (3 values per row), for rows [first, first + count).
std::shared_ptr<arrow::Table> HubTable(const Rows& rows, bool with_metadata = true) {
  arrow::BinaryBuilder bytes;
  arrow::StringBuilder path, caption;
  arrow::Int64Builder label;
  arrow::FloatBuilder emb_values;
  arrow::Int32Builder emb_offsets;
  int32_t off = 0;
  for (int r = rows.first; r < rows.first + rows.count; ++r) {
    if (r == rows.null_row) {
      EXPECT_TRUE(bytes.AppendNull().ok());
    } else {
      EXPECT_TRUE(bytes.Append(ImageBytes(r)).ok());
    }
    EXPECT_TRUE(path.Append("img_" + std::to_string(r) + ".jpg").ok());
    EXPECT_TRUE(label.Append(r % 5).ok());
    EXPECT_TRUE(caption.Append("caption of row " + std::to_string(r)).ok());
    EXPECT_TRUE(emb_offsets.Append(off).ok());
    for (int k = 0; k < 3; ++k)
      EXPECT_TRUE(emb_values.Append(static_cast<float>(r) + 0.25f * static_cast<float>(k)).ok());
    off += 3;
  }
  EXPECT_TRUE(emb_offsets.Append(off).ok());
  std::shared_ptr<arrow::Array> b, p, l, c, ev, eo;
  EXPECT_TRUE(bytes.Finish(&b).ok());
  EXPECT_TRUE(path.Finish(&p).ok());
  EXPECT_TRUE(label.Finish(&l).ok());
  EXPECT_TRUE(caption.Finish(&c).ok());
  EXPECT_TRUE(emb_values.Finish(&ev).ok());
  EXPECT_TRUE(emb_offsets.Finish(&eo).ok());
  auto image =
      arrow::StructArray::Make({b, p}, std::vector<std::string>{"bytes", "path"}).ValueOrDie();
  auto emb = arrow::ListArray::FromArrays(*eo, *ev).ValueOrDie();
  auto schema =
      arrow::schema({arrow::field("image", image->type()), arrow::field("label", arrow::int64()),
                     arrow::field("caption", arrow::utf8()), arrow::field("emb", emb->type())});
  if (with_metadata) {
    schema = schema->WithMetadata(arrow::key_value_metadata(
        {"huggingface"},
        {R"({"info": {"features": {"image": {"_type": "Image"}, "label": {"names": ["a", "b", "c", "d", "e"],
            "_type": "ClassLabel"}}}})"}));
  }
  return arrow::Table::Make(schema, {image, l, c, emb});
}

void WriteParquet(const std::shared_ptr<arrow::Table>& t, const std::string& path,
                  int64_t rows_per_group) {
  auto out = arrow::io::FileOutputStream::Open(path).ValueOrDie();
  parquet::WriterProperties::Builder b;
  b.compression(parquet::Compression::SNAPPY);
  // As pyarrow writes (and so the Hub): the Arrow schema and its metadata stored.
  const auto arrow_props = parquet::ArrowWriterProperties::Builder().store_schema()->build();
  ASSERT_TRUE(parquet::arrow::WriteTable(*t, arrow::default_memory_pool(), out, rows_per_group,
                                         b.build(), arrow_props)
                  .ok());
  ASSERT_TRUE(out->Close().ok());
}

void WriteIpc(const std::shared_ptr<arrow::Table>& t, const std::string& path, bool stream,
              int64_t rows_per_batch) {
  auto out = arrow::io::FileOutputStream::Open(path).ValueOrDie();
  auto writer = stream ? arrow::ipc::MakeStreamWriter(out, t->schema()).ValueOrDie()
                       : arrow::ipc::MakeFileWriter(out, t->schema()).ValueOrDie();
  ASSERT_TRUE(writer->WriteTable(*t, rows_per_batch).ok());
  ASSERT_TRUE(writer->Close().ok());
  ASSERT_TRUE(out->Close().ok());
}

class ColumnarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("feedline_columnar_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& leaf) const { return (dir_ / leaf).string(); }

  // 2 files of 30 + 23 rows, row groups of 7.
  std::vector<std::string> WriteHub() {
    WriteParquet(HubTable({0, 30}), Path("train-00000-of-00002.parquet"), 7);
    WriteParquet(HubTable({30, 23}), Path("train-00001-of-00002.parquet"), 7);
    return {Path("train-00000-of-00002.parquet"), Path("train-00001-of-00002.parquet")};
  }

  fs::path dir_;
};

std::string PartText(const Sample& s, std::string_view name) {
  const Sample::Part* p = s.FindPart(name);
  if (p == nullptr) return "<missing>";
  return std::string(reinterpret_cast<const char*>(p->data.data()), p->data.size());
}

TEST_F(ColumnarTest, HubLayoutPartsRoundTrip) {
  ASSERT_TRUE(ColumnarSupported());
  const std::vector<std::string> files = WriteHub();
  ColumnarOptions o;
  o.parts = true;
  o.columns = {"image", "label", "caption", "emb"};
  auto ds = ColumnarDataset::Open(files, o);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ((*ds)->num_rows(), 53u);
  // Row groups of 7: 5 x 7 + 2 ... per file.
  EXPECT_EQ((*ds)->group_sizes(), (std::vector<uint64_t>{7, 7, 7, 7, 2, 7, 7, 7, 2}));
  EXPECT_EQ((*ds)->classes(), (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  ASSERT_EQ((*ds)->columns().size(), 4u);
  EXPECT_EQ((*ds)->columns()[0].kind, ColumnKind::kEncoded);
  EXPECT_EQ((*ds)->columns()[1].kind, ColumnKind::kInteger);
  EXPECT_EQ((*ds)->columns()[2].kind, ColumnKind::kText);
  EXPECT_EQ((*ds)->columns()[3].kind, ColumnKind::kArray);
  for (uint64_t r = 0; r < 53; ++r) {
    Sample s;
    ASSERT_TRUE((*ds)->Read(r, s).ok()) << r;
    EXPECT_EQ(PartText(s, "image"), ImageBytes(static_cast<int>(r)));
    EXPECT_EQ(PartText(s, "label"), std::to_string(r % 5));
    EXPECT_EQ(s.label, static_cast<int64_t>(r % 5));
    EXPECT_EQ(PartText(s, "caption"), "caption of row " + std::to_string(r));
    const std::string npy = PartText(s, "emb");
    ASSERT_GE(npy.size(), 64u + 12u);
    EXPECT_EQ(npy.substr(0, 6), "\x93NUMPY");
    EXPECT_NE(npy.find("'descr': '<f4'"), std::string::npos);
    EXPECT_NE(npy.find("'shape': (3,)"), std::string::npos);
    float v[3];
    std::memcpy(v, npy.data() + npy.size() - 12, 12);
    EXPECT_EQ(v[0], static_cast<float>(r));
    EXPECT_EQ(v[2], static_cast<float>(r) + 0.5f);
    EXPECT_EQ(s.location().key, "img_" + std::to_string(r) + ".jpg");
    EXPECT_EQ(s.location().file, r < 30 ? files[0] : files[1]);
    EXPECT_EQ(s.location().record, static_cast<int64_t>(r < 30 ? r : r - 30));
  }
}

TEST_F(ColumnarTest, ImageClassificationFindsImageAndLabel) {
  const std::vector<std::string> files = WriteHub();
  auto ds = ColumnarDataset::Open(files, {});
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  ASSERT_EQ((*ds)->columns().size(), 2u);
  EXPECT_EQ((*ds)->columns()[0].name, "image");
  EXPECT_EQ((*ds)->columns()[1].name, "label");
  Sample s;
  ASSERT_TRUE((*ds)->Read(41, s).ok());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(s.data().data()), s.data().size()),
            ImageBytes(41));
  EXPECT_EQ(s.label, 1);
  EXPECT_TRUE(s.parts().empty());
}

TEST_F(ColumnarTest, ListsDirectoriesPatternsAndSaveToDisk) {
  const std::vector<std::string> files = WriteHub();
  auto listed = ColumnarDataset::ListFiles(dir_.string());
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(*listed, files);
  auto pattern = ColumnarDataset::ListFiles(Path("train-*-of-00002.parquet"));
  ASSERT_TRUE(pattern.ok());
  EXPECT_EQ(*pattern, files);
  EXPECT_EQ(ColumnarDataset::ListFiles(Path("val-*.parquet")).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(DetectSourceKind(dir_.string()), Source::Kind::kColumnar);
  EXPECT_EQ(DetectSourceKind(files[0]), Source::Kind::kColumnar);

  // save_to_disk: state.json names the data files in order.
  const fs::path hf = dir_ / "saved";
  fs::create_directories(hf);
  WriteIpc(HubTable({0, 10}), (hf / "data-00001-of-00002.arrow").string(), /*stream=*/true, 4);
  WriteIpc(HubTable({10, 5}), (hf / "data-00000-of-00002.arrow").string(), /*stream=*/true, 4);
  std::ofstream(hf / "state.json") << R"({"_data_files": [{"filename": "data-00001-of-00002.arrow"},
                                        {"filename": "data-00000-of-00002.arrow"}], "_split": "train"})";
  std::ofstream(hf / "dataset_info.json") << "{}";
  EXPECT_EQ(DetectSourceKind(hf.string()), Source::Kind::kColumnar);
  SourceOptions so;
  auto src = OpenSource(hf.string(), so);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ(src->kind, Source::Kind::kColumnar);
  EXPECT_EQ(src->num_samples, 15u);
  EXPECT_EQ(src->sample_groups, (std::vector<uint64_t>{4, 4, 2, 4, 1}));
}

TEST_F(ColumnarTest, ArrowIpcFileAndStreamFormats) {
  WriteIpc(HubTable({0, 12}), Path("a.arrow"), /*stream=*/false, 5);
  WriteIpc(HubTable({12, 9}), Path("b.arrow"), /*stream=*/true, 5);
  ColumnarOptions o;
  o.parts = true;
  o.columns = {"image", "caption"};
  auto ds = ColumnarDataset::Open({Path("a.arrow"), Path("b.arrow")}, o);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ((*ds)->num_rows(), 21u);
  EXPECT_EQ((*ds)->group_sizes(), (std::vector<uint64_t>{5, 5, 2, 5, 4}));
  for (uint64_t r = 0; r < 21; ++r) {
    Sample s;
    ASSERT_TRUE((*ds)->Read(r, s).ok());
    EXPECT_EQ(PartText(s, "image"), ImageBytes(static_cast<int>(r)));
    EXPECT_EQ(PartText(s, "caption"), "caption of row " + std::to_string(r));
    EXPECT_EQ(s.FindPart("label"), nullptr);  // not asked for, not read
  }
}

// Through a real Loader: every row once per epoch with a grouped shuffle,
// each group's rows inside one window's span, the bytes right, and the
// same stream for any thread count.
struct Delivered {
  std::vector<uint64_t> ids;
  std::map<uint64_t, std::string> bytes;
  std::vector<SampleError> skipped;  // from delivered batches
  ErrorMetrics errors;               // every error, batches not delivered included
  Status status;
};

Delivered RunEpoch(const std::string& path, uint32_t threads, uint32_t window, bool shuffle,
                   uint32_t rank = 0, uint32_t world = 1, uint64_t cache_bytes = 0,
                   ErrorPolicy policy = ErrorPolicy::kRaise, uint64_t max_errors = 0) {
  SourceOptions so;
  so.shuffle_window = window;
  if (cache_bytes > 0) so.read_ahead_bytes = cache_bytes;
  Delivered out;
  auto src = OpenSource(path, so);
  if (!src.ok()) {
    out.status = src.status();
    return out;
  }
  Pipeline p = MakeRawPipeline(src->read_op, src->num_samples, 1024);
  p.sample_groups = src->sample_groups;
  p.group_window = src->group_window;
  LoaderOptions o;
  o.batch_size = 4;
  o.shuffle = shuffle;
  o.seed = 7;
  o.num_threads = threads;
  o.rank = rank;
  o.world_size = world;
  o.error_policy = policy;
  o.max_errors = max_errors;
  auto loader = Loader::Create(std::move(p), o);
  if (!loader.ok()) {
    out.status = loader.status();
    return out;
  }
  Batch b;
  bool end = false;
  while (true) {
    out.status = (*loader)->Next(&b, &end);
    if (!out.status.ok() || end) break;
    const std::span<const uint8_t> bytes = b.field_as<const uint8_t>(0);
    const std::span<const int64_t> length = b.field_as<const int64_t>(1);
    for (size_t i = 0; i < b.size(); ++i) {
      const uint64_t id = b.sample_ids()[i];
      out.ids.push_back(id);
      out.bytes[id] =
          std::string(reinterpret_cast<const char*>(bytes.data() + i * 1024), length[i]);
    }
    out.skipped.insert(out.skipped.end(), b.skipped().begin(), b.skipped().end());
  }
  out.errors = (*loader)->Metrics().errors;
  return out;
}

TEST_F(ColumnarTest, LoaderGroupedShuffleReadsEveryRowOnceAndKeepsGroupsTogether) {
  WriteHub();
  const Delivered one = RunEpoch(dir_.string(), 1, /*window=*/2, /*shuffle=*/true);
  ASSERT_TRUE(one.status.ok()) << one.status.ToString();
  ASSERT_EQ(one.ids.size(), 53u);
  EXPECT_EQ(std::set<uint64_t>(one.ids.begin(), one.ids.end()).size(), 53u);
  for (const auto& [id, bytes] : one.bytes) EXPECT_EQ(bytes, ImageBytes(static_cast<int>(id)));
  std::vector<uint64_t> sorted = one.ids;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(one.ids, sorted);  // shuffled
  // Groups: file 0 rows [0,30) in groups of 7 (last 2), file 1 [30,53).
  const std::vector<uint64_t> sizes = {7, 7, 7, 7, 2, 7, 7, 7, 2};
  std::vector<uint64_t> first(sizes.size());
  for (size_t g = 1; g < sizes.size(); ++g) first[g] = first[g - 1] + sizes[g - 1];
  auto group_of = [&](uint64_t id) {
    return static_cast<size_t>(std::upper_bound(first.begin(), first.end(), id) - first.begin() -
                               1);
  };
  // A window of 2 groups: each position's window holds at most 2 groups,
  // and a group's rows all lie in one window.
  std::map<size_t, std::pair<size_t, size_t>> span;  // group -> first, last position
  for (size_t pos = 0; pos < one.ids.size(); ++pos) {
    const size_t g = group_of(one.ids[pos]);
    auto it = span.find(g);
    if (it == span.end()) {
      span[g] = {pos, pos};
    } else {
      it->second.second = pos;
    }
  }
  for (const auto& [g, s] : span) {
    size_t overlapping = 0;
    for (const auto& [h, t] : span)
      overlapping += (t.first <= s.second && s.first <= t.second) ? 1 : 0;
    EXPECT_LE(overlapping, 2u) << "group " << g;
  }
  // The same stream on three threads, and with another cache size.
  const Delivered three = RunEpoch(dir_.string(), 3, 2, true, 0, 1, /*cache_bytes=*/1 << 10);
  ASSERT_TRUE(three.status.ok()) << three.status.ToString();
  EXPECT_EQ(three.ids, one.ids);
  EXPECT_EQ(three.bytes, one.bytes);
  // Ranks: disjoint, together every row (53 = 2 * 26 + 1: one padding duplicate).
  const Delivered r0 = RunEpoch(dir_.string(), 2, 2, true, 0, 2);
  const Delivered r1 = RunEpoch(dir_.string(), 2, 2, true, 1, 2);
  ASSERT_TRUE(r0.status.ok() && r1.status.ok());
  std::set<uint64_t> all(r0.ids.begin(), r0.ids.end());
  all.insert(r1.ids.begin(), r1.ids.end());
  EXPECT_EQ(all.size(), 53u);
  EXPECT_EQ(r0.ids.size(), 27u);
  EXPECT_EQ(r1.ids.size(), 27u);
  // Interleaved, the two ranks' streams are the one-rank stream.
  for (size_t k = 0; k < 26; ++k) {
    EXPECT_EQ(r0.ids[k], one.ids[2 * k]);
    EXPECT_EQ(r1.ids[k], one.ids[2 * k + 1]);
  }
  // In order without shuffle.
  const Delivered plain = RunEpoch(dir_.string(), 2, 2, false);
  ASSERT_TRUE(plain.status.ok());
  EXPECT_EQ(plain.ids, sorted);
}

TEST_F(ColumnarTest, ResumeStateIsRefusedOnAnotherDatasetOrWindow) {
  WriteHub();
  auto make = [&](uint32_t window) {
    SourceOptions so;
    so.shuffle_window = window;
    auto src = OpenSource(dir_.string(), so);
    EXPECT_TRUE(src.ok());
    Pipeline p = MakeRawPipeline(src->read_op, src->num_samples, 1024);
    p.sample_groups = src->sample_groups;
    p.group_window = src->group_window;
    LoaderOptions o;
    o.batch_size = 4;
    o.shuffle = true;
    o.num_threads = 1;
    return std::move(Loader::Create(std::move(p), o).value());
  };
  auto a = make(2);
  Batch b;
  bool end = false;
  std::vector<uint64_t> after;
  ASSERT_TRUE(a->Next(&b, &end).ok());
  ASSERT_TRUE(a->Next(&b, &end).ok());
  const std::string state = a->SaveState();
  ASSERT_TRUE(a->Next(&b, &end).ok());
  after.assign(b.sample_ids().begin(), b.sample_ids().end());
  auto resumed = make(2);
  ASSERT_TRUE(resumed->RestoreState(state).ok());
  ASSERT_TRUE(resumed->Next(&b, &end).ok());
  EXPECT_EQ(std::vector<uint64_t>(b.sample_ids().begin(), b.sample_ids().end()), after);
  auto other_window = make(3);
  const Status refused = other_window->RestoreState(state);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(std::string(refused.message()).find("fingerprint"), std::string::npos)
      << refused.ToString();
  // Another dataset: one more row in the second file.
  WriteParquet(HubTable({30, 24}), Path("train-00001-of-00002.parquet"), 7);
  auto grown = make(2);
  EXPECT_FALSE(grown->RestoreState(state).ok());
}

TEST_F(ColumnarTest, BadInputNamesItsPlace) {
  const std::vector<std::string> files = WriteHub();
  // Not a Parquet file.
  std::ofstream(Path("junk.parquet")) << "this is not parquet at all, not even close";
  auto junk = ColumnarDataset::Open({Path("junk.parquet")}, {});
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(std::string(junk.status().message()).find("junk.parquet"), std::string::npos)
      << junk.status().ToString();
  // Truncated: the footer is gone.
  fs::copy_file(files[0], Path("cut.parquet"));
  fs::resize_file(Path("cut.parquet"), fs::file_size(files[0]) / 2);
  auto cut = ColumnarDataset::Open({Path("cut.parquet")}, {});
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(std::string(cut.status().message()).find("cut.parquet"), std::string::npos);
  // A column that is not there, one of a wrong type, a struct without bytes.
  ColumnarOptions o;
  o.columns = {"picture"};
  auto missing = ColumnarDataset::Open(files, o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("no column 'picture'"), std::string::npos);
  EXPECT_NE(std::string(missing.status().message()).find("caption (string)"), std::string::npos)
      << missing.status().ToString();
  o.columns = {"image", "caption"};  // caption as the label
  auto wrong = ColumnarDataset::Open(files, o);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(std::string(wrong.status().message()).find("not an integer column"), std::string::npos)
      << wrong.status().ToString();
  {
    arrow::StringBuilder pb;
    ASSERT_TRUE(pb.Append("x.jpg").ok());
    std::shared_ptr<arrow::Array> p;
    ASSERT_TRUE(pb.Finish(&p).ok());
    auto st = arrow::StructArray::Make({p}, std::vector<std::string>{"path"}).ValueOrDie();
    WriteParquet(arrow::Table::Make(arrow::schema({arrow::field("image", st->type())}), {st}),
                 Path("nobytes.parquet"), 10);
    ColumnarOptions img;
    img.columns = {"image"};
    auto nobytes = ColumnarDataset::Open({Path("nobytes.parquet")}, img);
    ASSERT_FALSE(nobytes.ok());
    EXPECT_NE(std::string(nobytes.status().message()).find("struct<path: string>"),
              std::string::npos)
        << nobytes.status().ToString();
  }
  // A file whose schema differs from the first's.
  {
    auto t = HubTable({0, 5});
    auto renamed = t->RenameColumns({"image", "label", "text", "emb"}).ValueOrDie();
    WriteParquet(renamed, Path("other.parquet"), 5);
    ColumnarOptions p;
    p.parts = true;
    p.columns = {"image", "caption"};
    auto mixed = ColumnarDataset::Open({files[0], Path("other.parquet")}, p);
    ASSERT_FALSE(mixed.ok());
    EXPECT_NE(std::string(mixed.status().message()).find("other.parquet' has no column 'caption'"),
              std::string::npos)
        << mixed.status().ToString();
  }
  // A null image: that row's error, naming file, row group, row and column.
  WriteParquet(HubTable({0, 20, false, 13}), Path("nulls.parquet"), 7);
  auto nulls = ColumnarDataset::Open({Path("nulls.parquet")}, {});
  ASSERT_TRUE(nulls.ok()) << nulls.status().ToString();
  Sample s;
  const Status bad = (*nulls)->Read(13, s);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.message()).find("nulls.parquet', row group 1, row 13, column 'image'"),
            std::string::npos)
      << bad.ToString();
  EXPECT_TRUE((*nulls)->Read(12, s).ok());
}

// A footer that lies: the file cut in its data but the footer kept, so the
// footer places the later row groups' chunks past the end of the file.
TEST_F(ColumnarTest, FooterThatPlacesChunksPastTheEndIsRefusedByName) {
  WriteParquet(HubTable({0, 2000}), Path("whole.parquet"), 100);
  std::string bytes;
  {
    std::ifstream in(Path("whole.parquet"), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  uint32_t footer_len = 0;
  std::memcpy(&footer_len, bytes.data() + bytes.size() - 8, 4);
  const size_t footer_at = bytes.size() - 8 - footer_len;
  // PAR1, the first half of the data, then the whole footer, its length and PAR1.
  const std::string lied = bytes.substr(0, footer_at / 2) + bytes.substr(footer_at);
  std::ofstream(Path("lied.parquet"), std::ios::binary) << lied;
  auto ds = ColumnarDataset::Open({Path("lied.parquet")}, {});
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), StatusCode::kDataLoss) << ds.status().ToString();
  const std::string m(ds.status().message());
  EXPECT_NE(m.find("lied.parquet', row group "), std::string::npos) << m;
  EXPECT_NE(m.find("the footer places it at bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("the file has " + std::to_string(lied.size())), std::string::npos) << m;
}

// A row group whose pages are damaged: its rows fail (each naming the
// group), skip-and-count takes them out one by one, the others arrive.
TEST_F(ColumnarTest, DamagedRowGroupIsErrorsOfItsRowsOnly) {
  WriteParquet(HubTable({0, 21}), Path("d.parquet"), 7);
  auto ds = ColumnarDataset::Open({Path("d.parquet")}, {});
  ASSERT_TRUE(ds.ok());
  // Overwrite the middle of row group 1's image column chunk with junk.
  auto md = parquet::ReadMetaData(arrow::io::ReadableFile::Open(Path("d.parquet")).ValueOrDie());
  auto cc = md->RowGroup(1)->ColumnChunk(0);
  const int64_t at = cc->data_page_offset() + 2;
  {
    std::fstream f(Path("d.parquet"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(at);
    const std::string junk(
        static_cast<size_t>(std::min<int64_t>(64, cc->total_compressed_size() - 4)), '\xee');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto damaged = ColumnarDataset::Open({Path("d.parquet")}, {});
  ASSERT_TRUE(damaged.ok()) << damaged.status().ToString();  // the footer is intact
  Sample s;
  const Status bad = (*damaged)->Read(9, s);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.message()).find("d.parquet', row group 1 (rows 7-13)"),
            std::string::npos)
      << bad.ToString();
  const Delivered got =
      RunEpoch(Path("d.parquet"), 2, 0, /*shuffle=*/true, 0, 1, 0, ErrorPolicy::kSkip, 100);
  ASSERT_TRUE(got.status.ok()) << got.status.ToString();
  EXPECT_EQ(got.ids.size(), 14u);
  // Counted, each of them: in the batches' lists, or in a batch all of whose samples failed.
  EXPECT_EQ(got.errors.skipped, 7u);
  ASSERT_EQ(got.errors.log.size(), 7u);
  for (const SampleError& e : got.errors.log) {
    EXPECT_GE(e.sample_id, 7u);
    EXPECT_LT(e.sample_id, 14u);
  }
  for (const auto& [id, bytes] : got.bytes) EXPECT_EQ(bytes, ImageBytes(static_cast<int>(id)));
  // Without skipping, the first bad row stops the epoch with its place.
  const Delivered raised = RunEpoch(Path("d.parquet"), 2, 0, false);
  EXPECT_FALSE(raised.status.ok());
  EXPECT_NE(std::string(raised.status.message()).find("row group 1"), std::string::npos)
      << raised.status.ToString();
}

}  // namespace
}  // namespace feedline
