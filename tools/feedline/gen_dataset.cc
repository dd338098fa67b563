// `feedline gen-dataset OUT --images N [--classes C] [--seed S]
//     [--photos DIR] [--gray-fraction F] [--png-fraction F] [--threads T]`
//
// Derives an ImageNet-like ImageFolder dataset from the repo's photographs,
// deterministically: image i is a pure function of (seed, i). Each is a
// random crop (25-100% of a photograph's area) resized to ImageNet's typical
// shapes (long side 500 for most, 300-500 otherwise; 4:3, 3:2, 1:1 and
// others; 3 in 4 landscape), tinted per class so classes differ, encoded as
// JPEG at quality 75-95; a fraction is grayscale and a fraction PNG.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "feedline/image.h"
#include "feedline/random.h"
#include "tools/feedline/commands.h"
#include "tools/feedline/files.h"

namespace feedline::cli {
namespace {

namespace fs = std::filesystem;

int Fail(const Status& st) {
  std::fprintf(stderr, "feedline gen-dataset: %s\n", st.ToString().c_str());
  return 1;
}

Result<std::vector<RgbImage>> LoadPhotos(const std::string& dir) {
  FEEDLINE_ASSIGN_OR_RETURN(std::vector<fs::path> listed, ListDirectory(dir));
  std::vector<fs::path> paths;
  for (const fs::path& p : listed) {
    const std::string ext = p.extension().string();
    if (ext == ".jpg" || ext == ".png") paths.push_back(p);
  }
  if (paths.empty()) return NotFoundError("no .jpg/.png photographs in '" + dir + "'");
  std::sort(paths.begin(), paths.end());
  std::vector<RgbImage> photos;
  for (const fs::path& p : paths) {
    // A fifo or a folder named like a photograph is an error, not a hang.
    FEEDLINE_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadRegularFile(p.string()));
    Result<RgbImage> img = DecodeImage(bytes);
    if (!img.ok()) return img.status().WithContext(p.string());
    photos.push_back(std::move(img).value());
  }
  return photos;
}

struct Generated {
  std::vector<uint8_t> bytes;
  std::string path;  // relative
};

Result<Generated> Generate(const std::vector<RgbImage>& photos, uint64_t seed, uint64_t i,
                           uint64_t classes, double gray_fraction, double png_fraction) {
  SampleRng rng = SampleRng::ForSample(seed, 0, i, 0);
  const RgbImage& src = photos[rng.UniformInt(photos.size())];
  // Output shape.
  const bool landscape = rng.Bernoulli(0.75);
  const double pick = rng.Uniform();
  const double aspect = pick < 0.5   ? 4.0 / 3
                        : pick < 0.7 ? 1.5
                        : pick < 0.8 ? 1.0
                                     : rng.Uniform(1.0, 1.8);
  const uint32_t long_side =
      rng.Bernoulli(0.6) ? 500u : static_cast<uint32_t>(rng.Uniform(300, 500));
  const uint32_t short_side = std::max(32u, static_cast<uint32_t>(std::lround(long_side / aspect)));
  const uint32_t ow = landscape ? long_side : short_side, oh = landscape ? short_side : long_side;
  // Crop of the photograph with that aspect, 25-100% of the area that allows.
  const double want = double(ow) / oh;
  uint32_t cw = src.width, ch = static_cast<uint32_t>(std::lround(src.width / want));
  if (ch > src.height) {
    ch = src.height;
    cw = static_cast<uint32_t>(std::lround(src.height * want));
  }
  const double shrink = std::sqrt(rng.Uniform(0.25, 1.0));
  cw = std::max(8u, static_cast<uint32_t>(cw * shrink));
  ch = std::max(8u, static_cast<uint32_t>(ch * shrink));
  const uint32_t cx = static_cast<uint32_t>(rng.UniformInt(src.width - cw + 1));
  const uint32_t cy = static_cast<uint32_t>(rng.UniformInt(src.height - ch + 1));
  FEEDLINE_ASSIGN_OR_RETURN(RgbImage img, ResizedCrop(src, cx, cy, cw, ch, ow, oh));
  // Per-class tint: channel gains in [0.8, 1.2].
  const uint64_t cls = i % classes;
  const uint64_t h = Mix64(cls + 0x5EED);
  float gain[3];
  for (int c = 0; c < 3; ++c)
    gain[c] = 0.8f + 0.4f * static_cast<float>((h >> (16 * c)) & 0xFFFF) / 65535.0f;
  for (size_t p = 0; p < img.pixels.size(); ++p) {
    img.pixels[p] = static_cast<uint8_t>(std::min(255.0f, img.pixels[p] * gain[p % 3]));
  }
  const bool gray = rng.Bernoulli(gray_fraction);
  const bool png = rng.Bernoulli(png_fraction);
  const int quality = 75 + static_cast<int>(rng.UniformInt(21));
  Generated g;
  char name[96];
  std::snprintf(name, sizeof(name), "class_%04llu/img_%08llu.%s",
                static_cast<unsigned long long>(cls), static_cast<unsigned long long>(i),
                png ? "png" : "jpg");
  g.path = name;
  if (png) {
    if (gray) {
      for (size_t p = 0; p < img.pixels.size(); p += 3) {
        const auto y = static_cast<uint8_t>(std::lround(
            0.299 * img.pixels[p] + 0.587 * img.pixels[p + 1] + 0.114 * img.pixels[p + 2]));
        img.pixels[p] = img.pixels[p + 1] = img.pixels[p + 2] = y;
      }
    }
    FEEDLINE_ASSIGN_OR_RETURN(g.bytes, EncodePng(img));
  } else {
    FEEDLINE_ASSIGN_OR_RETURN(g.bytes, EncodeJpeg(img, quality, gray));
  }
  return g;
}

}  // namespace

const Usage& GenDatasetUsage() {
  static const Usage u = {
      "gen-dataset",
      {"OUT [--images N] [options]"},
      "make the built-in ImageNet-like dataset",
      "Derives an ImageFolder dataset from photographs, deterministically: image i is a pure "
      "function\n"
      "of (seed, i): a random crop of a photograph resized to ImageNet's typical shapes, tinted "
      "per\n"
      "class, encoded as JPEG at quality 75-95; a fraction is grayscale and a fraction PNG.",
      {{"OUT", "the folder to write class_NNNN/img_NNNNNNNN.jpg|png into"}},
      {{"images", "N", "1000", "how many images"},
       {"classes", "C", "10", "how many classes"},
       {"seed", "S", "0", "seed of every random choice"},
       {"photos", "DIR", "tests/data/photos", "the .jpg/.png photographs to derive images from"},
       {"gray-fraction", "F", "0.1", "fraction of grayscale images"},
       {"png-fraction", "F", "0.05", "fraction of PNG images"},
       {"threads", "T", "0 = one per core", "encoding threads"}},
  };
  return u;
}

int RunGenDataset(const std::vector<std::string>& args) {
  Flags flags;
  if (auto rc = ParseOrExit(args, GenDatasetUsage(), &flags)) return *rc;
  const Flags* f = &flags;
  if (f->positional().size() != 1) return UsageError(GenDatasetUsage(), "expected one OUT");
  const std::string out = f->positional()[0];
  auto images = f->GetUint("images", 1000), classes = f->GetUint("classes", 10),
       seed = f->GetUint("seed", 0);
  auto threads = f->GetUint("threads", 0);
  auto gray = f->GetDouble("gray-fraction", 0.1), png = f->GetDouble("png-fraction", 0.05);
  for (const Status& st : {images.status(), classes.status(), seed.status(), threads.status(),
                           gray.status(), png.status()}) {
    if (!st.ok()) return Fail(st);
  }
  if (*classes == 0 || *images == 0)
    return Fail(InvalidArgumentError("--images and --classes must be > 0"));
  auto photos = LoadPhotos(f->Get("photos", "tests/data/photos"));
  if (!photos.ok()) return Fail(photos.status());
  std::error_code ec;
  for (uint64_t c = 0; c < std::min(*classes, *images); ++c) {
    char dir[32];
    std::snprintf(dir, sizeof(dir), "class_%04llu", static_cast<unsigned long long>(c));
    fs::create_directories(fs::path(out) / dir, ec);
    if (ec) return Fail(UnavailableError("cannot create '" + out + "': " + ec.message()));
  }
  std::atomic<uint64_t> next{0}, bytes{0};
  std::mutex mu;
  Status first_error;
  auto work = [&] {
    for (uint64_t i = next++; i < *images; i = next++) {
      Result<Generated> g = Generate(*photos, *seed, i, *classes, *gray, *png);
      Status st = g.status();
      if (st.ok()) {
        // Write to a temporary name, then rename: a killed run leaves no
        // half-written image behind.
        const fs::path final_path = fs::path(out) / g->path;
        const fs::path tmp = final_path.string() + ".tmp";
        std::ofstream o(tmp, std::ios::binary);
        o.write(reinterpret_cast<const char*>(g->bytes.data()),
                static_cast<std::streamsize>(g->bytes.size()));
        o.close();
        std::error_code rename_ec;
        if (!o) {
          st = UnavailableError("cannot write '" + tmp.string() + "'");
        } else {
          fs::rename(tmp, final_path, rename_ec);
          if (rename_ec)
            st = UnavailableError("cannot rename '" + tmp.string() + "': " + rename_ec.message());
        }
        bytes += g->bytes.size();
      }
      if (!st.ok()) {
        std::lock_guard<std::mutex> l(mu);
        if (first_error.ok()) first_error = st;
        next = *images;
      }
    }
  };
  std::vector<std::thread> pool;
  const uint64_t num_threads =
      *threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : *threads;
  for (uint64_t t = 0; t < num_threads; ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  if (!first_error.ok()) return Fail(first_error);
  std::printf("wrote %llu images (%.1f MB) in %llu classes to %s\n",
              static_cast<unsigned long long>(*images), bytes.load() / 1e6,
              static_cast<unsigned long long>(std::min(*classes, *images)), out.c_str());
  return 0;
}

}  // namespace feedline::cli
