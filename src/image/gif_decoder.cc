#include "src/image/gif_decoder.h"

#include <gif_lib.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <string>

#include "src/image/decode_internal.h"

namespace feedline::image {
namespace {

struct Reader {
  std::span<const uint8_t> bytes;
  size_t pos = 0;
};

int ReadBytes(GifFileType* gif, GifByteType* buf, int n) {
  auto* r = static_cast<Reader*>(gif->UserData);
  if (n <= 0) return 0;
  const size_t k = std::min(static_cast<size_t>(n), r->bytes.size() - r->pos);
  std::memcpy(buf, r->bytes.data() + r->pos, k);
  r->pos += k;
  return static_cast<int>(k);
}

struct GifCloser {
  void operator()(GifFileType* g) const {
    int err = 0;
    DGifCloseFile(g, &err);
  }
};
using GifPtr = std::unique_ptr<GifFileType, GifCloser>;

Status GifError(const std::string& what, int code) {
  const char* s = GifErrorString(code);
  const std::string msg = what + ": " + (s ? s : "unknown giflib error");
  if (code == D_GIF_ERR_NOT_ENOUGH_MEM) return ResourceExhaustedError(msg);
  return DataLossError(msg);
}

// What precedes the first frame's pixels.
struct FirstFrame {
  GifPtr gif;
  uint32_t canvas_width = 0, canvas_height = 0;
  int transparent = -1;  // index, from the last graphic control extension
};

// Opens the file and reads records up to the first image descriptor.
Status OpenFirstFrame(Reader* reader, const DecodeLimits& limits, FirstFrame* ff) {
  int err = 0;
  ff->gif.reset(DGifOpen(reader, ReadBytes, &err));
  if (!ff->gif) return GifError("corrupt GIF header", err);
  GifFileType* g = ff->gif.get();
  for (;;) {
    GifRecordType type;
    if (DGifGetRecordType(g, &type) == GIF_ERROR) return GifError("corrupt GIF", g->Error);
    if (type == TERMINATE_RECORD_TYPE) return DataLossError("corrupt GIF: no image in the file");
    if (type == EXTENSION_RECORD_TYPE) {
      int code = 0;
      GifByteType* block = nullptr;
      if (DGifGetExtension(g, &code, &block) == GIF_ERROR) {
        return GifError("corrupt GIF extension", g->Error);
      }
      if (code == GRAPHICS_EXT_FUNC_CODE && block != nullptr) {
        GraphicsControlBlock gcb;
        if (block[0] == 4 && DGifExtensionToGCB(block[0], block + 1, &gcb) == GIF_OK) {
          ff->transparent = gcb.TransparentColor;  // NO_TRANSPARENT_COLOR is -1
        }
      }
      while (block != nullptr) {  // sub-blocks
        if (DGifGetExtensionNext(g, &block) == GIF_ERROR) {
          return GifError("corrupt GIF extension", g->Error);
        }
      }
      continue;
    }
    if (type == IMAGE_DESC_RECORD_TYPE) {
      if (DGifGetImageDesc(g) == GIF_ERROR) return GifError("corrupt GIF frame header", g->Error);
      const GifImageDesc& d = g->Image;
      if (d.Left < 0 || d.Top < 0 || d.Width <= 0 || d.Height <= 0) {
        return DataLossError("corrupt GIF: empty first frame");
      }
      // PIL enlarges the canvas to hold a frame reaching past the screen.
      const uint64_t right = uint64_t(d.Left) + uint64_t(d.Width);
      const uint64_t bottom = uint64_t(d.Top) + uint64_t(d.Height);
      const uint64_t cw = std::max<uint64_t>(std::max(g->SWidth, 0), right);
      const uint64_t ch = std::max<uint64_t>(std::max(g->SHeight, 0), bottom);
      FEEDLINE_RETURN_IF_ERROR(CheckImageLimits("GIF", cw, ch, limits));
      ff->canvas_width = static_cast<uint32_t>(cw);
      ff->canvas_height = static_cast<uint32_t>(ch);
      return Status::OK();
    }
    return DataLossError("corrupt GIF: unknown record type");
  }
}

}  // namespace

Status GifDecoder::ReadHeader(std::span<const uint8_t> bytes, const DecodeLimits& limits,
                              ImageInfo* info) {
  Reader reader{bytes};
  FirstFrame ff;
  FEEDLINE_RETURN_IF_ERROR(OpenFirstFrame(&reader, limits, &ff));
  info->format = ImageFormat::kGif;
  info->width = ff.canvas_width;
  info->height = ff.canvas_height;
  info->channels = 3;
  info->progressive = ff.gif->Image.Interlace;
  return Status::OK();
}

Status GifDecoder::Decode(std::span<const uint8_t> bytes, const DecodeLimits& limits,
                          RgbRegion* out) {
  Reader reader{bytes};
  FirstFrame ff;
  FEEDLINE_RETURN_IF_ERROR(OpenFirstFrame(&reader, limits, &ff));
  GifFileType* g = ff.gif.get();
  const GifImageDesc& d = g->Image;

  // Palette: the frame's local table, else the global one. Entries past
  // the table (or all, without one) are gray levels, as in PIL's palettes.
  std::array<uint8_t, size_t{256} * 3> pal;
  for (size_t i = 0; i < 256; ++i) pal[3 * i] = pal[3 * i + 1] = pal[3 * i + 2] = uint8_t(i);
  const ColorMapObject* map = d.ColorMap ? d.ColorMap : g->SColorMap;
  if (map) {
    const auto n = static_cast<size_t>(std::clamp(map->ColorCount, 0, 256));
    for (size_t i = 0; i < n; ++i) {
      pal[3 * i] = map->Colors[i].Red;
      pal[3 * i + 1] = map->Colors[i].Green;
      pal[3 * i + 2] = map->Colors[i].Blue;
    }
  }

  const size_t cw = ff.canvas_width, ch = ff.canvas_height;
  if (rgb_.size() < cw * ch * 3) rgb_.resize(cw * ch * 3);
  const size_t fw = static_cast<size_t>(d.Width), fh = static_cast<size_t>(d.Height);
  if (row_.size() < fw) row_.resize(fw);

  // Background: the transparent index's colour, else index 0's.
  const uint8_t* bg = &pal[3 * static_cast<size_t>(ff.transparent >= 0 ? ff.transparent : 0)];
  uint8_t* px = rgb_.data();
  for (size_t i = 0; i < cw * ch; ++i) std::memcpy(px + 3 * i, bg, 3);

  // Interlaced frames deliver rows in four passes.
  static constexpr int kStart[4] = {0, 4, 2, 1}, kStep[4] = {8, 8, 4, 2};
  const int passes = d.Interlace ? 4 : 1;
  for (int pass = 0; pass < passes; ++pass) {
    const size_t start = d.Interlace ? kStart[pass] : 0, step = d.Interlace ? kStep[pass] : 1;
    for (size_t y = start; y < fh; y += step) {
      if (DGifGetLine(g, row_.data(), static_cast<int>(fw)) == GIF_ERROR) {
        return GifError("corrupt GIF at frame row " + std::to_string(y), g->Error);
      }
      uint8_t* dst = px + ((d.Top + y) * cw + static_cast<size_t>(d.Left)) * 3;
      for (size_t x = 0; x < fw; ++x) std::memcpy(dst + 3 * x, &pal[3 * size_t{row_[x]}], 3);
    }
  }
  out->full_width = out->width = ff.canvas_width;
  out->full_height = out->height = ff.canvas_height;
  out->x = out->y = 0;
  out->pixels = px;
  return Status::OK();
}

}  // namespace feedline::image
