// HTTP range reads (src/io/http_file.cc) from a real in-process server whose
// bytes come through a FaultFile (tests/io/fault_file.h): a server-side EIO
// answers 500, a short read sends a short body. Transient faults are
// retried and the bytes come back whole; persistent ones are errors naming
// the URL, the range and the attempts; latency changes no byte. One shard
// read over HTTP names its record as well.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "feedline/file.h"
#include "feedline/shard.h"
#include "gtest/gtest.h"
#include "tests/io/fault_file.h"

namespace feedline {
namespace {

namespace fs = std::filesystem;

// HTTP/1.1 for one file: HEAD, and GET with "Range: bytes=a-b"; one request
// per connection (Connection: close), each on its own thread.
class RangeServer {
 public:
  explicit RangeServer(std::unique_ptr<RandomAccessFile> file) : file_(std::move(file)) {
    listen_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(listen_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listen_, 16) != 0 ||
        ::getsockname(listen_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1";
    }
    port_ = ntohs(addr.sin_port);
    accept_ = std::thread([this] { AcceptLoop(); });
  }
  ~RangeServer() {
    stop_ = true;
    ::shutdown(listen_, SHUT_RDWR);
    accept_.join();
    ::close(listen_);
    std::lock_guard<std::mutex> l(mu_);
    for (std::thread& t : handlers_) t.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/data.fls"; }
  int gets() const { return gets_.load(); }

 private:
  void AcceptLoop() {
    while (!stop_) {
      const int conn = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) return;  // shut down
      std::lock_guard<std::mutex> l(mu_);
      handlers_.emplace_back([this, conn] { Handle(conn); });
    }
  }
  static void Send(int conn, const std::string& s) {
    for (size_t done = 0; done < s.size();) {
      const ssize_t n = ::send(conn, s.data() + done, s.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return;
      done += static_cast<size_t>(n);
    }
  }
  void Handle(int conn) {
    std::string request;
    char buf[4096];
    while (request.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(conn, buf, sizeof(buf), 0);
      if (n <= 0) break;
      request.append(buf, static_cast<size_t>(n));
    }
    const std::string size = std::to_string(file_->size());
    if (request.rfind("HEAD ", 0) == 0) {
      Send(conn, "HTTP/1.1 200 OK\r\nContent-Length: " + size + "\r\nConnection: close\r\n\r\n");
    } else if (request.rfind("GET ", 0) == 0) {
      ++gets_;
      const size_t r = request.find("Range: bytes=");
      unsigned long long a = 0, b = 0;
      if (r == std::string::npos ||
          std::sscanf(request.c_str() + r, "Range: bytes=%llu-%llu", &a, &b) != 2) {
        Send(conn, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      } else {
        std::string body(b - a + 1, '\0');
        const Status st = file_->Read(a, body.size(), body.data());
        const std::string head =
            "HTTP/1.1 206 Partial Content\r\nContent-Length: " + std::to_string(body.size()) +
            "\r\nContent-Range: bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" + size +
            "\r\nConnection: close\r\n\r\n";
        if (st.ok()) {
          Send(conn, head + body);
        } else if (st.code() == StatusCode::kDataLoss) {
          Send(conn,
               head + body.substr(0, body.size() / 2));  // a short body, then the connection closes
        } else {
          Send(conn,
               "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: "
               "close\r\n\r\n");
        }
      }
    }
    ::close(conn);
  }

  const std::unique_ptr<RandomAccessFile> file_;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> gets_{0};
  std::thread accept_;
  std::mutex mu_;
  std::vector<std::thread> handlers_;
};

class HttpFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("feedline_http_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "data.fls").string();
    auto w = ShardWriter::Create(path_);
    ASSERT_TRUE(w.ok());
    for (int i = 0; i < 6; ++i) {
      std::vector<uint8_t> data(3000 + 100 * i);
      for (size_t b = 0; b < data.size(); ++b) data[b] = static_cast<uint8_t>(i * 7 + b * 3);
      ASSERT_TRUE((*w)->Add({i, "k" + std::to_string(i), "", data}).ok());
    }
    ASSERT_TRUE((*w)->Finish().ok());
    std::ifstream in(path_, std::ios::binary);
    bytes_.assign(std::istreambuf_iterator<char>(in), {});
    http_.max_attempts = 2;
    http_.initial_backoff_ms = 1;
    http_.request_timeout_ms = 20000;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<RangeServer> Serve(const testing::Faults& faults) {
    auto file = OpenFile(path_);
    EXPECT_TRUE(file.ok());
    return std::make_unique<RangeServer>(testing::WithFaults(std::move(file).value(), faults));
  }
  std::string Slice(uint64_t offset, size_t n) const {
    return std::string(bytes_.data() + offset, n);
  }

  fs::path dir_;
  std::string path_;
  std::vector<char> bytes_;
  HttpOptions http_;
};

TEST_F(HttpFileTest, LatencyAtTheServerNeverChangesTheBytes) {
  testing::Faults faults;
  faults.latency = std::chrono::microseconds(2000);
  auto server = Serve(faults);
  auto f = OpenFile(server->url(), http_);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ((*f)->size(), bytes_.size());
  for (uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{4095}, uint64_t{10000}}) {
    std::string got(5000, '\0');
    ASSERT_TRUE((*f)->Read(offset, got.size(), got.data()).ok());
    EXPECT_EQ(got, Slice(offset, got.size())) << offset;
  }
}

TEST_F(HttpFileTest, ATransientShortBodyIsRetriedAndComesBackWhole) {
  testing::Faults faults;
  faults.short_at_offset = 2500;
  faults.short_reads_left = 1;
  auto server = Serve(faults);
  auto f = OpenFile(server->url(), http_);
  ASSERT_TRUE(f.ok()) << f.status();
  std::string got(4000, '\0');
  const Status st = (*f)->Read(1000, got.size(), got.data());
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(got, Slice(1000, got.size()));
  EXPECT_EQ(server->gets(), 2);
}

TEST_F(HttpFileTest, APersistentShortBodyIsAnErrorNamingTheUrlAndRange) {
  testing::Faults faults;
  faults.short_at_offset = 2500;
  auto server = Serve(faults);
  auto f = OpenFile(server->url(), http_);
  ASSERT_TRUE(f.ok()) << f.status();
  std::string got(4000, '\0');
  const Status st = (*f)->Read(1000, got.size(), got.data());
  ASSERT_FALSE(st.ok());
  const std::string m(st.message());
  EXPECT_NE(m.find(server->url()), std::string::npos) << m;
  EXPECT_NE(m.find("GET bytes=1000-4999"), std::string::npos) << m;
  EXPECT_NE(m.find("after 2 attempts"), std::string::npos) << m;
  EXPECT_EQ(server->gets(), 2);
}

TEST_F(HttpFileTest, ServerEioIsRetriedOnceAndThenNamed) {
  testing::Faults transient;
  transient.eio_on_read = 1;  // the first GET
  auto server = Serve(transient);
  auto f = OpenFile(server->url(), http_);
  ASSERT_TRUE(f.ok()) << f.status();
  std::string got(100, '\0');
  ASSERT_TRUE((*f)->Read(7, got.size(), got.data()).ok());
  EXPECT_EQ(got, Slice(7, got.size()));
  EXPECT_EQ(server->gets(), 2);

  testing::Faults persistent;
  persistent.eio_at_offset = 50;
  auto bad = Serve(persistent);
  auto g = OpenFile(bad->url(), http_);
  ASSERT_TRUE(g.ok()) << g.status();
  const Status st = (*g)->Read(7, got.size(), got.data());
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st;
  EXPECT_NE(st.message().find("GET bytes=7-106: HTTP 500 (after 2 attempts)"), std::string::npos)
      << st;
}

TEST_F(HttpFileTest, AShardRecordBehindServerEioIsNamedWithItsUrl) {
  auto local = ShardReader::Open(path_);
  ASSERT_TRUE(local.ok());
  testing::Faults faults;
  faults.eio_at_offset = (*local)->record_offset(3) + 10;
  auto server = Serve(faults);
  auto r = ShardReader::Open(server->url(), http_);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<uint8_t> scratch;
  ShardRecord rec;
  for (uint64_t i = 0; i < 6; ++i) {
    const Status st = (*r)->Read(i, &scratch, &rec);
    if (i != 3) {
      ASSERT_TRUE(st.ok()) << st;
      EXPECT_EQ(rec.label, static_cast<int64_t>(i));
      continue;
    }
    EXPECT_EQ(st.code(), StatusCode::kUnavailable);
    EXPECT_NE(st.message().find("shard '" + server->url() + "' record 3 at offset"),
              std::string::npos)
        << st;
  }
}

}  // namespace
}  // namespace feedline
