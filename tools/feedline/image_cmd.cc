// `feedline image`: look at what the image path does to one file.
//   feedline image info FILE
//   feedline image transform FILE OUT [--recipe train|eval|full] [--size N]
//       [--resize N] [--crop x,y,w,h] [--flip] [--seed S --id I]
//       [--dtype uint8|float32|float16|bfloat16] [--layout chw|hwc]
//       [--interpolation bilinear|bicubic] [--no-normalize] [--no-dct-scaling]
//     writes the output tensor's raw bytes to OUT and prints the crop used.
//   feedline image crops --width W --height H --count N [--seed S] [--recipe R]
//     prints the crop boxes the recipe draws for samples 0..N-1 (CSV).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "feedline/image.h"
#include "tools/feedline/commands.h"
#include "tools/feedline/files.h"

namespace feedline::cli {
namespace {

namespace fs = std::filesystem;

int Fail(const Status& st) {
  std::fprintf(stderr, "feedline image: %s\n", st.ToString().c_str());
  return 1;
}

Result<ImageTransform> TransformFromFlags(const Flags& f) {
  const std::string recipe = f.Get("recipe", "train");
  FEEDLINE_ASSIGN_OR_RETURN(uint64_t size, f.GetUint("size", 224));
  FEEDLINE_ASSIGN_OR_RETURN(uint64_t resize, f.GetUint("resize", 256));
  ImageTransform t;
  if (recipe == "train") {
    t = ImageNetTrain(static_cast<uint32_t>(size));
  } else if (recipe == "eval") {
    t = ImageNetEval(static_cast<uint32_t>(resize), static_cast<uint32_t>(size));
  } else if (recipe == "full") {
    t = ImageNetEval();
    t.crop = CropMode::kResizeFull;
    t.height = t.width = static_cast<uint32_t>(size);
  } else {
    return InvalidArgumentError("--recipe must be train, eval or full");
  }
  const std::string dtype = f.Get("dtype", "float32");
  if (dtype == "uint8")
    t.dtype = DType::kUInt8;
  else if (dtype == "float32")
    t.dtype = DType::kFloat32;
  else if (dtype == "float16")
    t.dtype = DType::kFloat16;
  else if (dtype == "bfloat16")
    t.dtype = DType::kBFloat16;
  else
    return InvalidArgumentError("unknown --dtype " + dtype);
  const std::string layout = f.Get("layout", "chw");
  if (layout == "chw")
    t.layout = Layout::kCHW;
  else if (layout == "hwc")
    t.layout = Layout::kHWC;
  else
    return InvalidArgumentError("--layout must be chw or hwc");
  const std::string interp = f.Get("interpolation", "bilinear");
  if (interp == "bilinear")
    t.interpolation = Interpolation::kBilinear;
  else if (interp == "bicubic")
    t.interpolation = Interpolation::kBicubic;
  else
    return InvalidArgumentError("--interpolation must be bilinear or bicubic");
  t.normalize = !f.Has("no-normalize");
  t.dct_scaling = !f.Has("no-dct-scaling");
  return t;
}

void PrintBox(const CropBox& b) {
  std::printf("region %u,%u,%u,%u box %.6f,%.6f,%.6f,%.6f flip %d\n", b.region_x, b.region_y,
              b.region_width, b.region_height, b.x, b.y, b.width, b.height, b.flip ? 1 : 0);
}

int Info(const Flags& f) {
  if (f.positional().size() != 2) return UsageError(ImageUsage(), "image info takes one FILE");
  auto bytes = ReadRegularFile(f.positional()[1]);
  if (!bytes.ok()) return Fail(bytes.status());
  auto info = ReadImageInfo(*bytes);
  if (!info.ok()) return Fail(info.status());
  std::printf("%s %ux%u channels %u%s\n", std::string(ImageFormatName(info->format)).c_str(),
              info->width, info->height, info->channels, info->progressive ? " progressive" : "");
  return 0;
}

int Transform(const Flags& f) {
  if (f.positional().size() != 3)
    return UsageError(ImageUsage(), "image transform takes FILE and OUT");
  auto t = TransformFromFlags(f);
  if (!t.ok()) return Fail(t.status());
  auto bytes = ReadRegularFile(f.positional()[1]);
  if (!bytes.ok()) return Fail(bytes.status());
  auto info = ReadImageInfo(*bytes, t->limits);
  if (!info.ok()) return Fail(info.status());
  CropBox box;
  if (f.Has("crop")) {
    // torchvision's crop(top=y, left=x, height=h, width=w), then resize.
    unsigned x, y, w, h;
    if (std::sscanf(f.Get("crop").c_str(), "%u,%u,%u,%u", &x, &y, &w, &h) != 4) {
      return Fail(InvalidArgumentError("--crop wants x,y,w,h"));
    }
    box.region_x = x;
    box.region_y = y;
    box.region_width = w;
    box.region_height = h;
    box.width = w;
    box.height = h;
    box.flip = f.Has("flip");
  } else {
    auto seed = f.GetUint("seed", 0);
    auto id = f.GetUint("id", 0);
    if (!seed.ok()) return Fail(seed.status());
    if (!id.ok()) return Fail(id.status());
    // Op index 0, as when the image op is the first op of a pipeline.
    SampleRng rng = SampleRng::ForSample(*seed, 0, *id, 0);
    box = ChooseCrop(*t, info->width, info->height, rng);
    if (f.Has("flip")) box.flip = true;
  }
  std::vector<uint8_t> out(ImageField(*t).SampleBytes());
  Status st = TransformImage(*bytes, *t, box, out.data());
  if (!st.ok()) return Fail(st);
  // An existing OUT must be a regular file: opening a fifo would block.
  std::error_code ec;
  const fs::file_status out_status = fs::status(f.positional()[2], ec);
  if (out_status.type() != fs::file_type::not_found && !fs::is_regular_file(out_status)) {
    Status out_ok = RequireRegularFile(f.positional()[2]);
    if (!out_ok.ok()) return Fail(out_ok.WithContext("OUT"));
  }
  std::ofstream o(f.positional()[2], std::ios::binary);
  o.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
  if (!o) return Fail(InternalError("cannot write '" + f.positional()[2] + "'"));
  PrintBox(box);
  return 0;
}

int Crops(const Flags& f) {
  auto t = TransformFromFlags(f);
  auto w = f.GetUint("width", 500), h = f.GetUint("height", 375), n = f.GetUint("count", 1000);
  auto seed = f.GetUint("seed", 0);
  if (!t.ok()) return Fail(t.status());
  if (!w.ok() || !h.ok() || !n.ok() || !seed.ok()) return Fail(InvalidArgumentError("bad number"));
  std::printf("x,y,width,height,flip\n");
  for (uint64_t id = 0; id < *n; ++id) {
    SampleRng rng = SampleRng::ForSample(*seed, 0, id, 0);
    const CropBox b = ChooseCrop(*t, static_cast<uint32_t>(*w), static_cast<uint32_t>(*h), rng);
    std::printf("%u,%u,%u,%u,%d\n", b.region_x, b.region_y, b.region_width, b.region_height,
                b.flip ? 1 : 0);
  }
  return 0;
}

}  // namespace

const Usage& ImageUsage() {
  static const Usage u = {
      "image",
      {"info FILE", "transform FILE OUT [options]", "crops [options]"},
      "inspect the image path on one file",
      "info: format, size and channels of FILE.\n"
      "transform: runs the image path on FILE, writes the output tensor's raw bytes to OUT and "
      "prints\n"
      "the crop used (--crop, or the recipe's random crop for --seed and --id).\n"
      "crops: prints the crop boxes the recipe draws for samples 0..N-1 of a WxH image (CSV).",
      {{"FILE", "a JPEG or PNG file"}, {"OUT", "where transform writes the tensor's bytes"}},
      {{"recipe", "R", "train",
        "train (random resized crop + flip), eval (resize + centre crop) or full"},
       {"size", "N", "224", "output side"},
       {"resize", "N", "256", "eval: the shorter side before the centre crop"},
       {"crop", "X,Y,W,H", "the recipe's crop", "transform: crop this region, then resize"},
       {"flip", "", "", "transform: flip horizontally"},
       {"seed", "S", "0", "seed of the recipe's random choices"},
       {"id", "I", "0", "transform: the sample id whose random choices to use"},
       {"dtype", "T", "float32", "uint8, float32, float16 or bfloat16"},
       {"layout", "L", "chw", "chw or hwc"},
       {"interpolation", "M", "bilinear", "bilinear or bicubic"},
       {"no-normalize", "", "", "skip the mean/std normalisation"},
       {"no-dct-scaling", "", "", "decode JPEGs at full size, not at a reduced DCT scale"},
       {"width", "W", "500", "crops: the image width"},
       {"height", "H", "375", "crops: the image height"},
       {"count", "N", "1000", "crops: how many samples"}},
  };
  return u;
}

int RunImage(const std::vector<std::string>& args) {
  Flags flags;
  if (auto rc = ParseOrExit(args, ImageUsage(), &flags)) return *rc;
  const auto& p = flags.positional();
  if (p.empty()) return UsageError(ImageUsage(), "expected info, transform or crops");
  if (p[0] == "info") return Info(flags);
  if (p[0] == "transform") return Transform(flags);
  if (p[0] == "crops") return Crops(flags);
  return UsageError(ImageUsage(), "unknown image command '" + p[0] + "'");
}

}  // namespace feedline::cli
