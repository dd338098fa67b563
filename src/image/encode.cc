// JPEG (libjpeg-turbo) and PNG (libspng) encoders.
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>
#include <spng.h>

#include "feedline/image.h"

namespace feedline {
namespace {

struct EncodeError {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void EncodeErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<EncodeError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Plain data only between setjmp and longjmp (see jpeg_decoder.h).
int CompressC(const uint8_t* pixels, uint32_t width, uint32_t height, int quality, bool gray,
              bool progressive, uint8_t* row_scratch, unsigned char** out, unsigned long* size,
              EncodeError* err) {
  jpeg_compress_struct cinfo;
  cinfo.err = jpeg_std_error(&err->pub);
  err->pub.error_exit = EncodeErrorExit;
  if (setjmp(err->jump)) {
    jpeg_destroy_compress(&cinfo);
    return -1;
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, out, size);
  cinfo.image_width = width;
  cinfo.image_height = height;
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  if (gray) jpeg_set_colorspace(&cinfo, JCS_GRAYSCALE);
  jpeg_set_quality(&cinfo, quality, TRUE);
  if (progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < height) {
    const uint8_t* src = pixels + static_cast<size_t>(cinfo.next_scanline) * width * 3;
    for (size_t i = 0; i < size_t{width} * 3; ++i) row_scratch[i] = src[i];
    JSAMPROW row = row_scratch;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return 0;
}

}  // namespace

Result<std::vector<uint8_t>> EncodeJpeg(const RgbImage& image, int quality, bool grayscale,
                                        bool progressive) {
  if (image.width == 0 || image.height == 0 ||
      image.pixels.size() != size_t{image.width} * image.height * 3) {
    return InvalidArgumentError("EncodeJpeg: image size and pixel count disagree");
  }
  std::vector<uint8_t> row(size_t{image.width} * 3);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  EncodeError err;
  const int rc = CompressC(image.pixels.data(), image.width, image.height, quality, grayscale,
                           progressive, row.data(), &out, &size, &err);
  std::unique_ptr<unsigned char, decltype(&std::free)> owned(out, &std::free);
  if (rc != 0) return InternalError(std::string("JPEG encode failed: ") + err.message);
  return std::vector<uint8_t>(out, out + size);
}

Result<std::vector<uint8_t>> EncodePng(const RgbImage& image) {
  if (image.width == 0 || image.height == 0 ||
      image.pixels.size() != size_t{image.width} * image.height * 3) {
    return InvalidArgumentError("EncodePng: image size and pixel count disagree");
  }
  std::unique_ptr<spng_ctx, decltype(&spng_ctx_free)> ctx(spng_ctx_new(SPNG_CTX_ENCODER),
                                                          &spng_ctx_free);
  if (!ctx) return ResourceExhaustedError("PNG: cannot create an encoder context");
  spng_set_option(ctx.get(), SPNG_ENCODE_TO_BUFFER, 1);
  spng_ihdr ihdr{};
  ihdr.width = image.width;
  ihdr.height = image.height;
  ihdr.bit_depth = 8;
  ihdr.color_type = SPNG_COLOR_TYPE_TRUECOLOR;
  spng_set_ihdr(ctx.get(), &ihdr);
  int e = spng_encode_image(ctx.get(), image.pixels.data(), image.pixels.size(), SPNG_FMT_PNG,
                            SPNG_ENCODE_FINALIZE);
  if (e) return InternalError(std::string("PNG encode failed: ") + spng_strerror(e));
  size_t size = 0;
  void* buf = spng_get_png_buffer(ctx.get(), &size, &e);
  if (buf == nullptr) return InternalError(std::string("PNG encode failed: ") + spng_strerror(e));
  std::vector<uint8_t> out(static_cast<uint8_t*>(buf), static_cast<uint8_t*>(buf) + size);
  std::free(buf);
  return out;
}

}  // namespace feedline
