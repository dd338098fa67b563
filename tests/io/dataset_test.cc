// Dataset manifests: round trip, and every malformed shape is a clear error,
// never an exception or a crash (regressions from tests/fuzz/manifest_fuzzer.cc
// included).
#include "feedline/dataset.h"

#include <string>

#include "gtest/gtest.h"

namespace feedline {
namespace {

TEST(ManifestTest, RoundTrips) {
  DatasetManifest m;
  m.classes = {"cat", "dog"};
  m.shards = {{"shard-00000.fls", 3, 1000, 0xDEADBEEF}, {"shard-00001.fls", 2, 700, 0x1}};
  m.records = 5;
  Result<DatasetManifest> back = DatasetManifest::Parse(m.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->classes, m.classes);
  EXPECT_EQ(back->records, 5u);
  ASSERT_EQ(back->shards.size(), 2u);
  EXPECT_EQ(back->shards[0].crc32c, 0xDEADBEEFu);
  EXPECT_EQ(back->shards[1].bytes, 700u);
}

TEST(ManifestTest, MalformedManifestsAreErrorsNamingTheField) {
  struct Case {
    const char* json;
    const char* expect;
  };
  const std::string shard = R"({"name":"a.fls","records":1,"bytes":64,"crc32c":"00000000"})";
  const std::string ok_head = R"("format":"feedline-dataset","version":1,"classes":[],)";
  const Case cases[] = {
      {"", "not a JSON object"},
      {"[1,2]", "not a JSON object"},
      {R"({"format":["feedline-dataset"]})", "\"format\""},  // fuzzer regression: type_error 302
      {R"({"format":17})", "\"format\""},
      {R"({"format":"feedline-dataset","version":"1"})", "\"version\""},
      {R"({"format":"feedline-dataset","version":2})", "\"version\""},
      {R"({"format":"feedline-dataset","version":1,"records":-1})", "\"records\""},
      {R"({"format":"feedline-dataset","version":1,"records":1,"classes":"x"})", "\"classes\""},
      {R"({"format":"feedline-dataset","version":1,"records":1,"classes":[1]})", "non-string"},
      {R"({"format":"feedline-dataset","version":1,"records":1,"classes":[],"shards":{}})",
       "\"shards\""},
      {R"({"format":"feedline-dataset","version":1,"records":1,"classes":[],"shards":[{"name":"a"}]})",
       "shard entry 0 needs"},
      {R"({"format":"feedline-dataset","version":1,"records":1,"classes":[],"shards":[{"name":"../etc/passwd","records":1,"bytes":64,"crc32c":"0"}]})",
       "invalid name"},
      {R"({"format":"feedline-dataset","version":1,"records":1,"classes":[],"shards":[{"name":"a.fls","records":1,"bytes":64,"crc32c":"xyz"}]})",
       "bad crc32c"},
      {R"({"format":"feedline-dataset","version":1,"records":2,"classes":[],"shards":[{"name":"a.fls","records":1,"bytes":64,"crc32c":"0"}]})",
       "but the shards hold 1"},
  };
  for (const Case& c : cases) {
    Result<DatasetManifest> r = DatasetManifest::Parse(c.json);
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos)
        << c.json << " -> " << r.status();
  }
  EXPECT_TRUE(
      DatasetManifest::Parse("{" + ok_head + R"("records":1,"shards":[)" + shard + "]}").ok());
}

}  // namespace
}  // namespace feedline
