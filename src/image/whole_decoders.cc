#include "src/image/whole_decoders.h"

namespace feedline::image {

bool IsWholeDecodeFormat(ImageFormat format) {
  switch (format) {
    case ImageFormat::kWebp:
    case ImageFormat::kTiff:
    case ImageFormat::kGif:
    case ImageFormat::kBmp:
    case ImageFormat::kPnm: return true;
    default: return false;
  }
}

Status WholeDecoders::ReadHeader(ImageFormat format, std::span<const uint8_t> bytes,
                                 const DecodeLimits& limits, ImageInfo* info) {
  switch (format) {
    case ImageFormat::kWebp: return webp.ReadHeader(bytes, limits, info);
    case ImageFormat::kTiff: return tiff.ReadHeader(bytes, limits, info);
    case ImageFormat::kGif: return gif.ReadHeader(bytes, limits, info);
    case ImageFormat::kBmp: return bmp.ReadHeader(bytes, limits, info);
    case ImageFormat::kPnm: return pnm.ReadHeader(bytes, limits, info);
    default: return InternalError("not a whole-decode format");
  }
}

Status WholeDecoders::DecodeRegion(ImageFormat format, std::span<const uint8_t> bytes,
                                   const DecodeLimits& limits, RgbRegion* out) {
  switch (format) {
    case ImageFormat::kWebp: return webp.Decode(bytes, limits, out);
    case ImageFormat::kTiff: return tiff.Decode(bytes, limits, out);
    case ImageFormat::kGif: return gif.Decode(bytes, limits, out);
    case ImageFormat::kBmp: return bmp.Decode(bytes, limits, out);
    case ImageFormat::kPnm: return pnm.Decode(bytes, limits, out);
    default: return InternalError("not a whole-decode format");
  }
}

uint64_t WholeDecoders::ScratchBytesFor(const ImageInfo& info) {
  switch (info.format) {
    case ImageFormat::kWebp: return WebpDecoder::ScratchBytesFor(info);
    case ImageFormat::kTiff: return TiffDecoder::ScratchBytesFor(info);
    case ImageFormat::kGif: return GifDecoder::ScratchBytesFor(info);
    case ImageFormat::kBmp: return BmpDecoder::ScratchBytesFor(info);
    case ImageFormat::kPnm: return PnmDecoder::ScratchBytesFor(info);
    default: return 0;
  }
}

}  // namespace feedline::image
