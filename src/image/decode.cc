// Format sniffing and the whole-image decode entry points of image.h.
#include <cstring>
#include <string>
#include <string_view>

#include "feedline/image.h"
#include "src/image/decode_internal.h"
#include "src/image/jpeg_decoder.h"
#include "src/image/png_decoder.h"
#include "src/image/whole_decoders.h"

namespace feedline {

std::string_view ImageFormatName(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg: return "jpeg";
    case ImageFormat::kPng: return "png";
    case ImageFormat::kGif: return "gif";
    case ImageFormat::kBmp: return "bmp";
    case ImageFormat::kTiff: return "tiff";
    case ImageFormat::kWebp: return "webp";
    case ImageFormat::kPnm: return "pnm";
    case ImageFormat::kPdf: return "pdf";
    case ImageFormat::kUnknown: break;
  }
  return "unknown";
}

ImageFormat SniffImageFormat(std::span<const uint8_t> b) {
  // string_view literals keep their embedded NULs and count their own length.
  using namespace std::string_view_literals;
  auto starts = [&b](std::string_view magic) {
    return b.size() >= magic.size() && std::memcmp(b.data(), magic.data(), magic.size()) == 0;
  };
  if (starts("\xFF\xD8\xFF"sv)) return ImageFormat::kJpeg;
  if (starts("\x89PNG\r\n\x1A\n"sv)) return ImageFormat::kPng;
  if (starts("GIF87a"sv) || starts("GIF89a"sv)) return ImageFormat::kGif;
  if (starts("BM"sv)) return ImageFormat::kBmp;
  if (starts("II*\0"sv) || starts("MM\0*"sv)) return ImageFormat::kTiff;
  if (starts("RIFF"sv) && b.size() >= 12 && std::memcmp(b.data() + 8, "WEBP", 4) == 0) {
    return ImageFormat::kWebp;
  }
  // Netpbm: P1..P6 and a whitespace byte (P7, PAM, is not decoded).
  if (b.size() >= 3 && b[0] == 'P' && b[1] >= '1' && b[1] <= '6' &&
      (b[2] == ' ' || b[2] == '\t' || b[2] == '\n' || b[2] == '\r')) {
    return ImageFormat::kPnm;
  }
  if (starts("%PDF"sv)) return ImageFormat::kPdf;
  return ImageFormat::kUnknown;
}

namespace image {
namespace {
constexpr std::string_view kAllowed = "jpeg, png, webp, tiff, gif, bmp, pnm";
}  // namespace

Status CheckImageLimits(const char* format, uint64_t width, uint64_t height,
                        const DecodeLimits& limits) {
  const std::string size = std::to_string(width) + "x" + std::to_string(height);
  if (width == 0 || height == 0) {
    return DataLossError(std::string("corrupt ") + format + ": empty image (" + size + ")");
  }
  if (width > limits.max_dimension || height > limits.max_dimension) {
    return InvalidArgumentError(std::string(format) + " is " + size + ", over max_dimension " +
                                std::to_string(limits.max_dimension));
  }
  if (width * height > limits.max_pixels) {  // both <= 2^32: no overflow
    return InvalidArgumentError(std::string(format) + " is " + size + ", over max_pixels " +
                                std::to_string(limits.max_pixels));
  }
  return Status::OK();
}

Status UnsupportedFormat(std::span<const uint8_t> bytes) {
  const ImageFormat f = SniffImageFormat(bytes);
  if (f == ImageFormat::kUnknown) {
    return UnimplementedError(
        "not an image: " + std::to_string(bytes.size()) +
        " bytes match no known image format (allowed: " + std::string(kAllowed) + ")");
  }
  return UnimplementedError("unsupported image format '" + std::string(ImageFormatName(f)) +
                            "' (allowed: " + std::string(kAllowed) + ")");
}

}  // namespace image

Result<ImageInfo> ReadImageInfo(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  ImageInfo info;
  const ImageFormat format = SniffImageFormat(bytes);
  if (image::IsWholeDecodeFormat(format)) {
    image::WholeDecoders d;
    FEEDLINE_RETURN_IF_ERROR(d.ReadHeader(format, bytes, limits, &info));
    return info;
  }
  switch (format) {
    case ImageFormat::kJpeg: {
      image::JpegDecoder d;
      FEEDLINE_RETURN_IF_ERROR(d.ReadHeader(bytes, limits, &info));
      return info;
    }
    case ImageFormat::kPng: {
      image::PngDecoder d;
      FEEDLINE_RETURN_IF_ERROR(d.ReadHeader(bytes, limits, &info));
      return info;
    }
    default: return image::UnsupportedFormat(bytes);
  }
}

Result<RgbImage> DecodeImage(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  ImageInfo info;
  image::RgbRegion region;
  image::JpegDecoder jpeg;
  image::PngDecoder png;
  image::WholeDecoders whole;
  const ImageFormat format = SniffImageFormat(bytes);
  switch (format) {
    case ImageFormat::kJpeg:
      FEEDLINE_RETURN_IF_ERROR(jpeg.ReadHeader(bytes, limits, &info));
      FEEDLINE_RETURN_IF_ERROR(jpeg.Decode(8, 0, 0, info.width, info.height, &region));
      break;
    case ImageFormat::kPng:
      FEEDLINE_RETURN_IF_ERROR(png.ReadHeader(bytes, limits, &info));
      FEEDLINE_RETURN_IF_ERROR(png.Decode(bytes, limits, info.width, 0, info.height, &region));
      break;
    default:
      if (!image::IsWholeDecodeFormat(format)) return image::UnsupportedFormat(bytes);
      FEEDLINE_RETURN_IF_ERROR(whole.DecodeRegion(format, bytes, limits, &region));
      break;
  }
  RgbImage out;
  out.width = region.width;
  out.height = region.height;
  out.pixels.assign(region.pixels, region.pixels + size_t{region.width} * region.height * 3);
  return out;
}

}  // namespace feedline
