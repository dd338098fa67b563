#include "src/image/webp_decoder.h"

#include <webp/decode.h>

#include <string>

#include "src/image/decode_internal.h"

namespace feedline::image {
namespace {

const char* StatusName(VP8StatusCode code) {
  switch (code) {
    case VP8_STATUS_OK: return "ok";
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "not enough data (truncated file?)";
  }
  return "unknown error";
}

Status WebpError(const char* what, VP8StatusCode code) {
  const std::string msg = std::string(what) + ": " + StatusName(code);
  if (code == VP8_STATUS_OUT_OF_MEMORY) return ResourceExhaustedError(msg);
  if (code == VP8_STATUS_UNSUPPORTED_FEATURE) return UnimplementedError(msg);
  return DataLossError(msg);
}

Status Features(std::span<const uint8_t> bytes, const DecodeLimits& limits,
                WebPBitstreamFeatures* f) {
  const VP8StatusCode code = WebPGetFeatures(bytes.data(), bytes.size(), f);
  if (code != VP8_STATUS_OK) return WebpError("corrupt WebP header", code);
  if (f->has_animation) {
    return UnimplementedError("animated WebP is not supported (only still images)");
  }
  return CheckImageLimits("WebP", static_cast<uint32_t>(f->width), static_cast<uint32_t>(f->height),
                          limits);
}

}  // namespace

Status WebpDecoder::ReadHeader(std::span<const uint8_t> bytes, const DecodeLimits& limits,
                               ImageInfo* info) {
  WebPBitstreamFeatures f;
  FEEDLINE_RETURN_IF_ERROR(Features(bytes, limits, &f));
  info->format = ImageFormat::kWebp;
  info->width = static_cast<uint32_t>(f.width);
  info->height = static_cast<uint32_t>(f.height);
  info->channels = f.has_alpha ? 4 : 3;
  info->progressive = false;
  return Status::OK();
}

Status WebpDecoder::Decode(std::span<const uint8_t> bytes, const DecodeLimits& limits,
                           RgbRegion* out) {
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) return InternalError("libwebp version mismatch");
  FEEDLINE_RETURN_IF_ERROR(Features(bytes, limits, &config.input));
  const size_t w = static_cast<size_t>(config.input.width);
  const size_t h = static_cast<size_t>(config.input.height);
  if (rgb_.size() < w * h * 3) rgb_.resize(w * h * 3);
  // Decode straight into our scratch: libwebp allocates only its own
  // per-decode state. MODE_RGB drops alpha without premultiplying.
  config.output.colorspace = MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = rgb_.data();
  config.output.u.RGBA.stride = static_cast<int>(w * 3);
  config.output.u.RGBA.size = w * h * 3;
  const VP8StatusCode code = WebPDecode(bytes.data(), bytes.size(), &config);
  WebPFreeDecBuffer(&config.output);  // no-op for external memory; keeps the contract
  if (code != VP8_STATUS_OK) return WebpError("corrupt WebP", code);
  out->full_width = out->width = static_cast<uint32_t>(w);
  out->full_height = out->height = static_cast<uint32_t>(h);
  out->x = out->y = 0;
  out->pixels = rgb_.data();
  return Status::OK();
}

}  // namespace feedline::image
