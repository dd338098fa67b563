#include "src/image/jpeg_decoder.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
// jpeglib.h needs size_t and FILE declared first.
#include <jerror.h>
#include <jpeglib.h>

namespace feedline::image {
namespace {

struct ErrorMgr {
  jpeg_error_mgr pub;  // first: libjpeg casts cinfo->err to this
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX + 96];
  bool warnings_fatal;
  bool in_header;  // inside jpeg_read_header: junk between segments is tolerated
  unsigned max_scans;
};

[[noreturn]] void ErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorMgr*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void EmitMessage(j_common_ptr cinfo, int level) {
  auto* err = reinterpret_cast<ErrorMgr*>(cinfo->err);
  if (level < 0) {  // a warning: corrupt data that libjpeg would paper over
    ++cinfo->err->num_warnings;
    // Stray bytes between header segments (some encoders and editors write
    // them) lose no pixel data; libjpeg and Pillow decode such files.
    if (err->in_header && cinfo->err->msg_code == JWRN_EXTRANEOUS_DATA) return;
    if (err->warnings_fatal) ErrorExit(cinfo);
  }
}

// Called while libjpeg absorbs input; bounds the work a hostile progressive
// file can ask for (libjpeg-turbo's own TurboJPEG uses the same hook).
void ProgressMonitor(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  auto* err = reinterpret_cast<ErrorMgr*>(cinfo->err);
  if (d->input_scan_number > static_cast<int>(err->max_scans)) {
    std::snprintf(err->message, sizeof(err->message),
                  "progressive JPEG has more than %u scans (max_jpeg_scans)", err->max_scans);
    std::longjmp(err->jump, 1);
  }
}

}  // namespace

struct JpegDecoder::State {
  jpeg_decompress_struct cinfo;
  ErrorMgr err;
  jpeg_progress_mgr progress;
  bool header_read = false;
};

JpegDecoder::JpegDecoder() : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.cinfo.err = jpeg_std_error(&s.err.pub);
  s.err.pub.error_exit = ErrorExit;
  s.err.pub.emit_message = EmitMessage;
  s.err.warnings_fatal = true;
  s.err.in_header = false;
  s.err.max_scans = 256;
  s.err.message[0] = '\0';
  // jpeg_create_decompress can only fail on out-of-memory, through ErrorExit.
  if (setjmp(s.err.jump)) {
    std::fprintf(stderr, "feedline: jpeg_create_decompress failed: %s\n", s.err.message);
    std::abort();
  }
  jpeg_create_decompress(&s.cinfo);
  s.progress.progress_monitor = ProgressMonitor;
  s.cinfo.progress = &s.progress;
}

JpegDecoder::~JpegDecoder() { jpeg_destroy_decompress(&state_->cinfo); }

namespace {

// Everything between setjmp and the libjpeg calls is plain data.
int ReadHeaderC(jpeg_decompress_struct* cinfo, ErrorMgr* err, const uint8_t* data, size_t size) {
  if (setjmp(err->jump)) {
    err->in_header = false;
    jpeg_abort_decompress(cinfo);
    return -1;
  }
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  err->in_header = true;
  jpeg_read_header(cinfo, TRUE);
  err->in_header = false;
  return 0;
}

int StartC(jpeg_decompress_struct* cinfo, ErrorMgr* err, int scale_num, J_COLOR_SPACE out_space) {
  if (setjmp(err->jump)) {
    jpeg_abort_decompress(cinfo);
    return -1;
  }
  cinfo->scale_num = static_cast<unsigned>(scale_num);
  cinfo->scale_denom = 8;
  cinfo->out_color_space = out_space;
  cinfo->dct_method = JDCT_ISLOW;  // what PIL uses: the reference pixels
  cinfo->do_fancy_upsampling = TRUE;
  jpeg_start_decompress(cinfo);
  return 0;
}

// Rows are written packed at the width libjpeg's crop settles on (*width
// on return), `comps` bytes per pixel: no repacking afterwards.
int ReadRowsC(jpeg_decompress_struct* cinfo, ErrorMgr* err, JDIMENSION* x0, JDIMENSION* width,
              JDIMENSION y0, JDIMENSION rows, uint8_t* out, int comps) {
  if (setjmp(err->jump)) {
    jpeg_abort_decompress(cinfo);
    return -1;
  }
  if (*x0 != 0 || *width != cinfo->output_width) jpeg_crop_scanline(cinfo, x0, width);
  const size_t stride = static_cast<size_t>(*width) * static_cast<size_t>(comps);
  if (y0 > 0 && jpeg_skip_scanlines(cinfo, y0) != y0) {
    std::snprintf(err->message, sizeof(err->message), "could not skip to row %u", y0);
    jpeg_abort_decompress(cinfo);
    return -1;
  }
  // Up to 16 rows a call (libjpeg returns at most one row group: 1 or 2
  // rows for most files): fewer trips through its controllers.
  constexpr JDIMENSION kRowsPerCall = 16;
  JSAMPROW row_ptrs[kRowsPerCall];
  for (JDIMENSION r = 0; r < rows;) {
    const JDIMENSION want = std::min(kRowsPerCall, rows - r);
    for (JDIMENSION i = 0; i < want; ++i) row_ptrs[i] = out + static_cast<size_t>(r + i) * stride;
    const JDIMENSION got = jpeg_read_scanlines(cinfo, row_ptrs, want);
    if (got == 0) {
      std::snprintf(err->message, sizeof(err->message), "decoder returned no row %u", y0 + r);
      jpeg_abort_decompress(cinfo);
      return -1;
    }
    r += got;
  }
  // Stop here: rows below the region are never decoded.
  jpeg_abort_decompress(cinfo);
  return 0;
}

struct FrameHeader {
  uint8_t sof = 0;  // marker type, 0xC0..0xCF
  uint32_t precision = 0, width = 0, height = 0, components = 0;
};

// Moves `i` to the byte after the next marker's 0xFF (fill bytes skipped),
// stepping over anything that is not a marker as libjpeg does (it warns about
// "extraneous bytes before marker" and carries on, and so does Pillow).
// False if the bytes end first.
bool NextMarker(std::span<const uint8_t> b, size_t* i) {
  while (*i < b.size() && b[*i] != 0xFF) ++*i;
  while (*i < b.size() && b[*i] == 0xFF) ++*i;
  return *i < b.size();
}

// Markers that stand alone, without a length: RSTn, SOI, TEM.
bool IsStandalone(uint8_t m) { return (m >= 0xD0 && m <= 0xD8) || m == 0x01; }

// Walks the marker segments up to the first frame header (SOFn). Reading it
// ourselves lets us name our own limits and "unsupported" cases before
// libjpeg sees the file (libjpeg would reject some with generic messages).
Result<FrameHeader> ReadFrameHeader(std::span<const uint8_t> b) {
  size_t i = 2;  // after SOI
  while (NextMarker(b, &i)) {
    const uint8_t m = b[i++];
    if (m == 0x00 || IsStandalone(m)) continue;
    if (m == 0xDA || m == 0xD9) break;  // scan or end before any frame
    if (i + 2 > b.size()) break;
    const size_t len = size_t{b[i]} << 8 | b[i + 1];
    if (len < 2)
      return DataLossError("corrupt JPEG header: bad segment length at offset " +
                           std::to_string(i - 2));
    const bool sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
    if (sof) {
      if (len < 8 || i + 8 > b.size())
        return DataLossError("corrupt JPEG header: short frame header");
      FrameHeader f;
      f.sof = m;
      f.precision = b[i + 2];
      f.height = uint32_t{b[i + 3]} << 8 | b[i + 4];
      f.width = uint32_t{b[i + 5]} << 8 | b[i + 6];
      f.components = b[i + 7];
      return f;
    }
    i += len;
  }
  return DataLossError("corrupt JPEG header: no frame header (SOF) found");
}

// True if the marker structure reaches an end-of-image marker: segments are
// stepped over by their lengths and entropy-coded data up to the first marker
// that is not a stuffed 0xFF00 or a restart marker, so an EOI is found where
// libjpeg would find it and a truncated file has none. Bytes after the EOI
// (phones append thumbnails, depth maps and videos there) are never read.
bool HasEndOfImage(std::span<const uint8_t> b) {
  size_t i = 2;  // after SOI
  while (NextMarker(b, &i)) {
    const uint8_t m = b[i++];
    if (m == 0xD9) return true;
    if (m == 0x00 || IsStandalone(m)) continue;
    if (i + 2 > b.size()) return false;
    i += size_t{b[i]} << 8 | b[i + 1];
    if (m != 0xDA) continue;
    // Entropy-coded data: 0xFF is followed by 0x00 (stuffing), fill bytes or
    // RSTn inside it; anything else is the next marker.
    while (i < b.size()) {
      const void* ff = std::memchr(b.data() + i, 0xFF, b.size() - i);
      if (ff == nullptr) return false;
      size_t j = static_cast<size_t>(static_cast<const uint8_t*>(ff) - b.data()) + 1;
      while (j < b.size() && b[j] == 0xFF) ++j;
      if (j >= b.size()) return false;
      if (b[j] == 0x00 || (b[j] >= 0xD0 && b[j] <= 0xD7)) {
        i = j + 1;
        continue;
      }
      i = j - 1;  // the marker's 0xFF: the outer loop reads it
      break;
    }
  }
  return false;
}

}  // namespace

Status JpegDecoder::ReadHeader(std::span<const uint8_t> bytes, const DecodeLimits& limits,
                               ImageInfo* info) {
  State& s = *state_;
  s.err.warnings_fatal = limits.jpeg_warnings_fatal;
  s.err.max_scans = limits.max_jpeg_scans;
  // A header read whose decode never came (the sample failed in between,
  // e.g. over its scratch budget) leaves libjpeg mid-stream: reset it.
  if (s.header_read) jpeg_abort_decompress(&s.cinfo);
  s.header_read = false;
  has_restarts_ = false;
  FEEDLINE_ASSIGN_OR_RETURN(FrameHeader frame, ReadFrameHeader(bytes));
  if (frame.sof == 0xC3 || frame.sof == 0xC7 || frame.sof == 0xCB || frame.sof == 0xCF) {
    return UnimplementedError("unsupported JPEG: lossless (SOF" + std::to_string(frame.sof - 0xC0) +
                              ") is not supported");
  }
  if (frame.precision != 8) {
    return UnimplementedError("unsupported JPEG: " + std::to_string(frame.precision) +
                              "-bit samples (only 8-bit JPEG is supported)");
  }
  if (frame.width > limits.max_dimension || frame.height > limits.max_dimension) {
    return InvalidArgumentError("JPEG is " + std::to_string(frame.width) + "x" +
                                std::to_string(frame.height) + ", over max_dimension " +
                                std::to_string(limits.max_dimension));
  }
  if (uint64_t{frame.width} * frame.height > limits.max_pixels) {
    return InvalidArgumentError("JPEG is " + std::to_string(frame.width) + "x" +
                                std::to_string(frame.height) + " = " +
                                std::to_string(uint64_t{frame.width} * frame.height) +
                                " pixels, over max_pixels " + std::to_string(limits.max_pixels));
  }
  // We may stop decoding after the last row a crop needs, so a cut-off tail
  // would go unnoticed: require the end-of-image marker instead.
  if (limits.jpeg_warnings_fatal && !HasEndOfImage(bytes)) {
    return DataLossError("corrupt JPEG: no end-of-image marker (truncated file?)");
  }
  if (ReadHeaderC(&s.cinfo, &s.err, bytes.data(), bytes.size()) != 0) {
    return DataLossError(std::string("corrupt JPEG header: ") + s.err.message);
  }
  const jpeg_decompress_struct& c = s.cinfo;
  info->format = ImageFormat::kJpeg;
  info->width = c.image_width;
  info->height = c.image_height;
  info->channels = static_cast<uint32_t>(c.num_components);
  info->progressive = c.progressive_mode;
  s.header_read = true;
  bytes_ = bytes;
  // Only files with a DRI pay for the walk over their entropy-coded data,
  // and what we found must agree with what libjpeg read.
  has_restarts_ = c.restart_interval > 0 && !c.progressive_mode && !c.arith_code &&
                  c.comps_in_scan == c.num_components && FindRestartIntervals(bytes, &layout_) &&
                  layout_.interval == c.restart_interval && layout_.width == c.image_width &&
                  layout_.height == c.image_height &&
                  layout_.components == static_cast<uint32_t>(c.num_components);
  for (int i = 0; has_restarts_ && i < c.num_components; ++i) {
    has_restarts_ = layout_.h_samp[i] == static_cast<uint32_t>(c.comp_info[i].h_samp_factor) &&
                    layout_.v_samp[i] == static_cast<uint32_t>(c.comp_info[i].v_samp_factor);
  }
  return Status::OK();
}

void JpegDecoder::ScaledSize(int scale_num, uint32_t* width, uint32_t* height) {
  const jpeg_decompress_struct& c = state_->cinfo;
  // jdmaster.c: output size = ceil(image size * scale_num / 8).
  *width = static_cast<uint32_t>((uint64_t{c.image_width} * scale_num + 7) / 8);
  *height = static_cast<uint32_t>((uint64_t{c.image_height} * scale_num + 7) / 8);
}

uint64_t JpegDecoder::DecodeScratchBytes(int scale_num, uint32_t x0, uint32_t y0, uint32_t x1,
                                         uint32_t y1) {
  const jpeg_decompress_struct& c = state_->cinfo;
  uint32_t sw = 0, sh = 0;
  ScaledSize(scale_num, &sw, &sh);
  const uint64_t cw = std::min(x1, sw) > x0 ? std::min(x1, sw) - x0 : 0;
  const uint64_t rows = std::min(y1, sh) > y0 ? std::min(y1, sh) - y0 : 0;
  // Decode's row buffer (see there), and libjpeg's per-row buffers: about
  // one iMCU row (16 lines of 16 bytes a pixel, generously).
  uint64_t bytes = (cw + 64) * 4 * rows + uint64_t{sw} * 16 * 16 + (256u << 10);
  // The window JPEG of the restart path is at most the file.
  if (has_restarts_) bytes += bytes_.size();
  // A progressive file, or a sequential one whose first scan does not carry
  // every component, is decoded through a full coefficient buffer.
  if (c.progressive_mode || c.buffered_image || c.comps_in_scan < c.num_components) {
    // jdcoefct.c keeps the whole coefficient image: per component,
    // width_in_blocks x height_in_blocks rounded up to its sampling factors,
    // 64 coefficients of 2 bytes each.
    for (int i = 0; i < c.num_components; ++i) {
      const jpeg_component_info& comp = c.comp_info[i];
      const uint64_t h = static_cast<uint64_t>(std::max(1, comp.h_samp_factor));
      const uint64_t v = static_cast<uint64_t>(std::max(1, comp.v_samp_factor));
      const uint64_t wb = (uint64_t{comp.width_in_blocks} + h - 1) / h * h;
      const uint64_t hb = (uint64_t{comp.height_in_blocks} + v - 1) / v * v;
      bytes += wb * hb * 64 * sizeof(JCOEF);
    }
  }
  return bytes;
}

void JpegDecoder::TrimScratch() {
  std::vector<uint8_t>().swap(pixels_);
  std::vector<uint8_t>().swap(cmyk_row_);
  std::vector<uint8_t>().swap(window_);
  std::vector<size_t>().swap(layout_.begin);
  std::vector<size_t>().swap(layout_.end);
}

bool JpegDecoder::DecodeFromRestarts(int scale_num, uint32_t x0, uint32_t y0, uint32_t x1,
                                     uint32_t y1, RgbRegion* out, bool* reread_ok) {
  *reread_ok = true;
  State& s = *state_;
  const RestartLayout& l = layout_;
  uint32_t fw = 0, fh = 0;
  ScaledSize(scale_num, &fw, &fh);
  x1 = std::min(x1, fw);
  y1 = std::min(y1, fh);
  if (x0 >= x1 || y0 >= y1) return false;
  // One MCU at this scale: each 8x8 block decodes to scale_num^2 pixels.
  const uint32_t smw = l.mcu_width / 8 * static_cast<uint32_t>(scale_num);
  const uint32_t smh = l.mcu_height / 8 * static_cast<uint32_t>(scale_num);
  // The MCUs of the region and one more on every side: libjpeg's fancy
  // upsampling reads the neighbouring chroma samples, which must be the
  // image's and not a replicated window edge.
  McuWindow w;
  w.col0 = x0 / smw > 0 ? x0 / smw - 1 : 0;
  w.row0 = y0 / smh > 0 ? y0 / smh - 1 : 0;
  w.col1 = std::min(l.mcus_x, (x1 + smw - 1) / smw + 1);
  w.row1 = std::min(l.mcus_y, (y1 + smh - 1) / smh + 1);
  w = AlignWindow(l, w);
  if (w.col0 == 0 && w.row0 == 0 && w.col1 == l.mcus_x && w.row1 == l.mcus_y) return false;
  BuildWindowJpeg(bytes_, l, w, &window_);
  jpeg_abort_decompress(&s.cinfo);
  const uint32_t dx = w.col0 * smw, dy = w.row0 * smh;
  if (ReadHeaderC(&s.cinfo, &s.err, window_.data(), window_.size()) == 0 &&
      DecodeOpen(scale_num, x0 - dx, y0 - dy, x1 - dx, y1 - dy, out).ok()) {
    out->x += dx;
    out->y += dy;
    out->full_width = fw;
    out->full_height = fh;
    return true;
  }
  // Back to the whole file; it read before, so it reads again.
  jpeg_abort_decompress(&s.cinfo);
  *reread_ok = ReadHeaderC(&s.cinfo, &s.err, bytes_.data(), bytes_.size()) == 0;
  return false;
}

Status JpegDecoder::Decode(int scale_num, uint32_t x0, uint32_t y0, uint32_t x1, uint32_t y1,
                           RgbRegion* out) {
  State& s = *state_;
  if (!s.header_read) return FailedPreconditionError("JpegDecoder::Decode before ReadHeader");
  s.header_read = false;
  last_used_restarts_ = false;
  bool reread_ok = true;
  if (has_restarts_ && DecodeFromRestarts(scale_num, x0, y0, x1, y1, out, &reread_ok)) {
    last_used_restarts_ = true;
    return Status::OK();
  }
  if (!reread_ok) return DataLossError(std::string("corrupt JPEG header: ") + s.err.message);
  return DecodeOpen(scale_num, x0, y0, x1, y1, out);
}

Status JpegDecoder::DecodeOpen(int scale_num, uint32_t x0, uint32_t y0, uint32_t x1, uint32_t y1,
                               RgbRegion* out) {
  State& s = *state_;
  const bool cmyk = s.cinfo.jpeg_color_space == JCS_CMYK || s.cinfo.jpeg_color_space == JCS_YCCK;
  if (StartC(&s.cinfo, &s.err, scale_num, cmyk ? JCS_CMYK : JCS_RGB) != 0) {
    return DataLossError(std::string("corrupt JPEG: ") + s.err.message);
  }
  const uint32_t fw = s.cinfo.output_width, fh = s.cinfo.output_height;
  x1 = std::min(x1, fw);
  y1 = std::min(y1, fh);
  if (x0 >= x1 || y0 >= y1) {
    jpeg_abort_decompress(&s.cinfo);
    return InternalError("empty JPEG decode region");
  }
  // libjpeg's fancy upsampling of a cropped row replicates the crop's first
  // and last column instead of reading the chroma sample beyond it, so a
  // crop that starts on an iMCU boundary or ends inside the image gives
  // edge columns that differ from a full decode (up to 35 levels on 4:2:0
  // noise). One column more on the left (libjpeg then aligns it down) and
  // one iMCU column more on the right keep every requested column interior.
  const auto imcu_width =
      static_cast<uint32_t>(s.cinfo.max_h_samp_factor * s.cinfo.min_DCT_scaled_size);
  JDIMENSION cx = x0 > 0 ? x0 - 1 : 0;
  JDIMENSION cw = std::min(fw, x1 + imcu_width) - cx;
  const uint32_t rows = y1 - y0;
  const int comps = cmyk ? 4 : 3;
  // Room for the crop libjpeg widens (at most one iMCU column, 32 px at
  // scale 8/8, on the left) as well as the request.
  const size_t room = (static_cast<size_t>(cw) + 64) * comps * rows;
  if (pixels_.size() < room) pixels_.resize(room);
  if (ReadRowsC(&s.cinfo, &s.err, &cx, &cw, y0, rows, pixels_.data(), comps) != 0) {
    return DataLossError(std::string("corrupt JPEG: ") + s.err.message);
  }
  // RGB rows are packed already; CMYK converts to RGB in place (each row's
  // RGB ends before its CMYK starts, and before the next row's CMYK).
  const bool adobe_inverted = s.cinfo.saw_Adobe_marker;
  for (uint32_t r = 0; r < rows && cmyk; ++r) {
    const uint8_t* src = pixels_.data() + static_cast<size_t>(r) * cw * 4;
    uint8_t* dst = pixels_.data() + static_cast<size_t>(r) * cw * 3;
    for (size_t x = 0; x < cw; ++x) {
      uint32_t c = src[4 * x], m = src[4 * x + 1], y = src[4 * x + 2], k = src[4 * x + 3];
      if (!adobe_inverted) {
        c = 255 - c;
        m = 255 - m;
        y = 255 - y;
        k = 255 - k;
      }
      // Adobe CMYK JPEGs store inverted values: R = C * K / 255.
      dst[3 * x] = static_cast<uint8_t>((c * k + 127) / 255);
      dst[3 * x + 1] = static_cast<uint8_t>((m * k + 127) / 255);
      dst[3 * x + 2] = static_cast<uint8_t>((y * k + 127) / 255);
    }
  }
  out->full_width = fw;
  out->full_height = fh;
  out->x = cx;
  out->y = y0;
  out->width = cw;
  out->height = rows;
  out->pixels = pixels_.data();
  return Status::OK();
}

}  // namespace feedline::image
