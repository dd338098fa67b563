#include "src/image/jpeg_transcode.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "feedline/image.h"
// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

#include "feedline/image.h"

namespace feedline::image {
namespace {

struct TranscodeError {
  jpeg_error_mgr pub;  // first: libjpeg casts cinfo->err to this
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void TranscodeErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<TranscodeError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Any warning means corrupt data that libjpeg would paper over.
void TranscodeEmitMessage(j_common_ptr cinfo, int level) {
  if (level < 0) TranscodeErrorExit(cinfo);
}

enum TranscodeRc { kOk = 0, kFailed = -1, kUnsupported = 1 };

bool StartsWith(const jpeg_saved_marker_ptr m, const char* tag, size_t n) {
  return m->data_length >= n && std::memcmp(m->data, tag, n) == 0;
}

// Plain data only between setjmp and longjmp (see jpeg_decoder.h).
int TranscodeC(const uint8_t* data, size_t size, uint32_t interval_mcus, unsigned char** out,
               unsigned long* out_size, TranscodeError* err) {
  jpeg_decompress_struct src;
  jpeg_compress_struct dst;
  // Zeroed, so that destroying one not yet created is a no-op (mem is null).
  std::memset(&src, 0, sizeof(src));
  std::memset(&dst, 0, sizeof(dst));
  src.err = jpeg_std_error(&err->pub);
  dst.err = &err->pub;
  err->pub.error_exit = TranscodeErrorExit;
  err->pub.emit_message = TranscodeEmitMessage;
  err->message[0] = '\0';
  if (setjmp(err->jump)) {
    jpeg_destroy_compress(&dst);
    jpeg_destroy_decompress(&src);
    return kFailed;
  }
  jpeg_create_decompress(&src);
  jpeg_create_compress(&dst);
  jpeg_mem_src(&src, data, static_cast<unsigned long>(size));
  for (int m = 0; m < 16; ++m) jpeg_save_markers(&src, JPEG_APP0 + m, 0xFFFF);
  jpeg_save_markers(&src, JPEG_COM, 0xFFFF);
  jpeg_read_header(&src, TRUE);
  // CMYK/YCCK and RGB files carry their colour meaning in an Adobe marker
  // that libjpeg would rewrite; leave them, and arithmetic coding, alone.
  if ((src.jpeg_color_space != JCS_YCbCr && src.jpeg_color_space != JCS_GRAYSCALE) ||
      src.arith_code || src.data_precision != 8) {
    jpeg_destroy_compress(&dst);
    jpeg_destroy_decompress(&src);
    return kUnsupported;
  }
  jvirt_barray_ptr* coefficients = jpeg_read_coefficients(&src);
  jpeg_copy_critical_parameters(&src, &dst);
  const uint32_t mcu_width =
      src.num_components == 1 ? 8u : 8u * static_cast<uint32_t>(src.max_h_samp_factor);
  const uint32_t mcus_x = (src.image_width + mcu_width - 1) / mcu_width;
  dst.restart_interval = SnapRestartInterval(interval_mcus, mcus_x);
  dst.optimize_coding = TRUE;
  jpeg_mem_dest(&dst, out, out_size);
  jpeg_write_coefficients(&dst, coefficients);
  // The markers libjpeg writes itself from the parameters are not copied.
  for (jpeg_saved_marker_ptr m = src.marker_list; m != nullptr; m = m->next) {
    if (dst.write_JFIF_header && m->marker == JPEG_APP0 && StartsWith(m, "JFIF\0", 5)) continue;
    if (dst.write_Adobe_marker && m->marker == JPEG_APP0 + 14 && StartsWith(m, "Adobe", 5))
      continue;
    jpeg_write_marker(&dst, m->marker, m->data, m->data_length);
  }
  jpeg_finish_compress(&dst);
  jpeg_finish_decompress(&src);
  jpeg_destroy_compress(&dst);
  jpeg_destroy_decompress(&src);
  return kOk;
}

bool LooksLikeJpeg(std::span<const uint8_t> b) {
  return b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF;
}

}  // namespace

uint32_t SnapRestartInterval(uint32_t interval_mcus, uint32_t mcus_x) {
  if (interval_mcus == 0 || mcus_x == 0) return 0;
  if (interval_mcus >= mcus_x) {
    // Whole rows; DRI is 16-bit.
    const uint32_t rows = std::max(1u, std::min(interval_mcus, 65535u) / mcus_x);
    return rows * mcus_x <= 65535u ? rows * mcus_x : mcus_x;
  }
  for (uint32_t d = interval_mcus; d > 1; --d) {
    if (mcus_x % d == 0) return d;
  }
  return 1;
}

Status TranscodeJpegWithRestarts(std::span<const uint8_t> jpeg, uint32_t interval_mcus,
                                 std::vector<uint8_t>* out) {
  if (!LooksLikeJpeg(jpeg)) return UnimplementedError("not a JPEG");
  // libjpeg's own frame checks reject lossless and 12-bit files with an
  // error; name them as unsupported instead.
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  TranscodeError err;
  const int rc = TranscodeC(jpeg.data(), jpeg.size(), interval_mcus, &buffer, &size, &err);
  std::unique_ptr<unsigned char, decltype(&std::free)> owned(buffer, &std::free);
  if (rc == kUnsupported) {
    return UnimplementedError(
        "JPEG not transcoded: CMYK, YCCK or RGB colour, arithmetic coding or not 8-bit");
  }
  if (rc != kOk) {
    const std::string why = err.message;
    if (why.find("Unsupported") != std::string::npos ||
        why.find("precision") != std::string::npos) {
      return UnimplementedError("JPEG not transcoded: " + why);
    }
    return DataLossError("corrupt JPEG, not transcoded: " + why);
  }
  out->assign(buffer, buffer + size);
  return Status::OK();
}

}  // namespace feedline::image

namespace feedline {

Status AddJpegRestartMarkers(std::span<const uint8_t> jpeg, uint32_t interval_mcus,
                             std::vector<uint8_t>* out) {
  return image::TranscodeJpegWithRestarts(jpeg, interval_mcus, out);
}

}  // namespace feedline
