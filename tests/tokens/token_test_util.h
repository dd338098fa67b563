// Test helpers for the token readers: a per-test temporary directory and
// writers for flat token files and Megatron indexed datasets, written here
// from the format's spec (docs/tokens.md), not with Megatron's code.
#ifndef FEEDLINE_TESTS_TOKENS_TOKEN_TEST_UTIL_H_
#define FEEDLINE_TESTS_TOKENS_TOKEN_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace feedline::testing_tokens {

namespace fs = std::filesystem;

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("feedline_tokens_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

template <typename T>
void Append(std::string* out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out->append(b, sizeof(T));
}

// Raw little-endian ids of type T, no header (nanoGPT's train.bin).
template <typename T>
void WriteFlat(const std::string& path, const std::vector<int64_t>& tokens) {
  std::string s;
  for (int64_t t : tokens) Append<T>(&s, static_cast<T>(t));
  WriteBytes(path, s);
}

// A Megatron dataset: documents made of sequences, ids stored as T
// (dtype_code per the index spec: 4 int32, 8 uint16, ...).
struct MegatronFixture {
  std::vector<std::vector<std::vector<int64_t>>> documents;  // documents -> sequences -> ids
};

template <typename T>
std::string MegatronBin(const MegatronFixture& m) {
  std::string s;
  for (const auto& doc : m.documents)
    for (const auto& seq : doc)
      for (int64_t t : seq) Append<T>(&s, static_cast<T>(t));
  return s;
}

inline std::string MegatronIndex(const MegatronFixture& m, uint8_t dtype_code, size_t item) {
  std::vector<int32_t> lengths;
  std::vector<int64_t> pointers, doc_indices{0};
  int64_t ptr = 0;
  for (const auto& doc : m.documents) {
    for (const auto& seq : doc) {
      lengths.push_back(static_cast<int32_t>(seq.size()));
      pointers.push_back(ptr);
      ptr += static_cast<int64_t>(seq.size() * item);
    }
    doc_indices.push_back(static_cast<int64_t>(lengths.size()));
  }
  std::string s("MMIDIDX\0\0", 9);
  Append<uint64_t>(&s, 1);
  s.push_back(static_cast<char>(dtype_code));
  Append<uint64_t>(&s, lengths.size());
  Append<uint64_t>(&s, doc_indices.size());
  for (int32_t l : lengths) Append(&s, l);
  for (int64_t p : pointers) Append(&s, p);
  for (int64_t d : doc_indices) Append(&s, d);
  return s;
}

// Offsets of the index fields, for corrupting them.
constexpr size_t kVersionOffset = 9;
constexpr size_t kDTypeOffset = 17;
constexpr size_t kSequenceCountOffset = 18;
constexpr size_t kDocumentCountOffset = 26;
constexpr size_t kLengthsOffset = 34;

template <typename T>
void Put(std::string* s, size_t offset, T v) {
  std::memcpy(s->data() + offset, &v, sizeof(T));
}

}  // namespace feedline::testing_tokens

#endif  // FEEDLINE_TESTS_TOKENS_TOKEN_TEST_UTIL_H_
