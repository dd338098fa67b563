#include "src/image/tiff_decoder.h"

#include <tiffio.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "src/image/decode_internal.h"

namespace feedline::image {
namespace {

// The bytes being read and libtiff's first error message.
struct MemoryFile {
  std::span<const uint8_t> bytes;
  uint64_t pos = 0;
  std::string error;
};

tmsize_t Read(thandle_t h, void* buf, tmsize_t n) {
  auto* f = static_cast<MemoryFile*>(h);
  if (n <= 0 || f->pos >= f->bytes.size()) return 0;
  const uint64_t k = std::min<uint64_t>(static_cast<uint64_t>(n), f->bytes.size() - f->pos);
  std::memcpy(buf, f->bytes.data() + f->pos, k);
  f->pos += k;
  return static_cast<tmsize_t>(k);
}

tmsize_t Write(thandle_t, void*, tmsize_t) { return -1; }

toff_t Seek(thandle_t h, toff_t off, int whence) {
  auto* f = static_cast<MemoryFile*>(h);
  uint64_t base = 0;
  if (whence == SEEK_CUR)
    base = f->pos;
  else if (whence == SEEK_END)
    base = f->bytes.size();
  else if (whence != SEEK_SET)
    return static_cast<toff_t>(-1);
  // toff_t is unsigned; libtiff passes negative relative offsets wrapped.
  f->pos = base + off;
  return f->pos;
}

int Close(thandle_t) { return 0; }
toff_t Size(thandle_t h) { return static_cast<MemoryFile*>(h)->bytes.size(); }
int Map(thandle_t, void**, toff_t*) { return 0; }  // no mapping: reads go through Read
void Unmap(thandle_t, void*, toff_t) {}

int OnError(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  auto* f = static_cast<MemoryFile*>(user);
  if (f->error.empty()) {
    char buf[512];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    f->error = (module && *module ? std::string(module) + ": " : std::string()) + buf;
  }
  return 1;  // handled: libtiff's global handler (stderr) is not called
}

int OnWarning(TIFF*, void*, const char*, const char*, va_list) { return 1; }  // silenced

struct TiffCloser {
  void operator()(TIFF* t) const { TIFFClose(t); }
};
using TiffPtr = std::unique_ptr<TIFF, TiffCloser>;
struct OptionsFree {
  void operator()(TIFFOpenOptions* o) const { TIFFOpenOptionsFree(o); }
};

std::string Message(const MemoryFile& f, const char* fallback) {
  return f.error.empty() ? std::string(fallback) : f.error;
}

// Opens the first directory of `f` and checks the limits from its tags.
Result<TiffPtr> Open(MemoryFile* f, const DecodeLimits& limits, uint32_t* width, uint32_t* height) {
  std::unique_ptr<TIFFOpenOptions, OptionsFree> opts(TIFFOpenOptionsAlloc());
  if (!opts) return ResourceExhaustedError("TIFF: cannot allocate options");
  TIFFOpenOptionsSetErrorHandlerExtR(opts.get(), OnError, f);
  TIFFOpenOptionsSetWarningHandlerExtR(opts.get(), OnWarning, f);
  // One strip, tile or tag array may not exceed what a max_pixels image of
  // 16-bit RGBA would need: hostile headers cannot make libtiff allocate
  // gigabytes before our limits apply.
  TIFFOpenOptionsSetMaxSingleMemAlloc(
      opts.get(), static_cast<tmsize_t>(std::max<uint64_t>(limits.max_pixels * 8, 16u << 20)));
  // "m": no memory mapping.
  TiffPtr tif(
      TIFFClientOpenExt("memory", "rm", f, Read, Write, Seek, Close, Size, Map, Unmap, opts.get()));
  if (!tif) return DataLossError("corrupt TIFF: " + Message(*f, "cannot read the header"));
  uint32_t w = 0, h = 0;
  if (!TIFFGetField(tif.get(), TIFFTAG_IMAGEWIDTH, &w) ||
      !TIFFGetField(tif.get(), TIFFTAG_IMAGELENGTH, &h)) {
    return DataLossError("corrupt TIFF: no ImageWidth/ImageLength tags");
  }
  FEEDLINE_RETURN_IF_ERROR(CheckImageLimits("TIFF", w, h, limits));
  *width = w;
  *height = h;
  return tif;
}

}  // namespace

Status TiffDecoder::ReadHeader(std::span<const uint8_t> bytes, const DecodeLimits& limits,
                               ImageInfo* info) {
  MemoryFile f{bytes};
  uint32_t w = 0, h = 0;
  FEEDLINE_ASSIGN_OR_RETURN(TiffPtr tif, Open(&f, limits, &w, &h));
  uint16_t spp = 1;
  TIFFGetFieldDefaulted(tif.get(), TIFFTAG_SAMPLESPERPIXEL, &spp);
  info->format = ImageFormat::kTiff;
  info->width = w;
  info->height = h;
  info->channels = spp;
  info->progressive = false;
  return Status::OK();
}

Status TiffDecoder::Decode(std::span<const uint8_t> bytes, const DecodeLimits& limits,
                           RgbRegion* out) {
  MemoryFile f{bytes};
  uint32_t w = 0, h = 0;
  FEEDLINE_ASSIGN_OR_RETURN(TiffPtr tif, Open(&f, limits, &w, &h));
  // Alpha is dropped, not premultiplied into the colour (PIL keeps the
  // stored colour of an RGBA TIFF): declare every extra sample
  // "unspecified", which libtiff's RGBA path copies through untouched.
  uint16_t extra = 0;
  uint16_t* info = nullptr;
  if (TIFFGetField(tif.get(), TIFFTAG_EXTRASAMPLES, &extra, &info) && extra > 0) {
    std::vector<uint16_t> unspecified(extra, EXTRASAMPLE_UNSPECIFIED);
    TIFFSetField(tif.get(), TIFFTAG_EXTRASAMPLES, extra, unspecified.data());
  }
  char emsg[1024] = "";
  if (!TIFFRGBAImageOK(tif.get(), emsg)) {
    return UnimplementedError(std::string("unsupported TIFF layout: ") + emsg);
  }
  TIFFRGBAImage img;
  if (!TIFFRGBAImageBegin(&img, tif.get(), /*stop_on_error=*/1, emsg)) {
    return DataLossError(std::string("corrupt TIFF: ") + emsg);
  }
  // Stored order, as PIL reads it: ask for the file's own orientation, so
  // libtiff flips nothing.
  img.req_orientation = img.orientation;
  const size_t n = size_t{w} * h;
  if (raster_.size() < n) raster_.resize(n);
  const int ok = TIFFRGBAImageGet(&img, raster_.data(), w, h);
  TIFFRGBAImageEnd(&img);
  if (!ok || !f.error.empty()) {
    return DataLossError("corrupt TIFF: " + Message(f, "cannot decode the image data"));
  }
  // ABGR words -> packed RGB bytes, in place (3 <= 4 bytes: never overtakes).
  auto* rgb = reinterpret_cast<uint8_t*>(raster_.data());
  for (size_t i = 0; i < n; ++i) {
    const uint32_t p = raster_[i];
    rgb[3 * i] = static_cast<uint8_t>(TIFFGetR(p));
    rgb[3 * i + 1] = static_cast<uint8_t>(TIFFGetG(p));
    rgb[3 * i + 2] = static_cast<uint8_t>(TIFFGetB(p));
  }
  out->full_width = out->width = w;
  out->full_height = out->height = h;
  out->x = out->y = 0;
  out->pixels = rgb;
  return Status::OK();
}

}  // namespace feedline::image
