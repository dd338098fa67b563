// Restart intervals of a baseline JPEG: where they lie in the file, and a
// smaller JPEG built from only the intervals that cover a window of MCUs.
//
// A restart marker (RSTn, 0xFFD0..0xFFD7) resets the entropy decoder: the DC
// predictions start again from zero and the bit stream is byte-aligned, so
// each interval decodes on its own. When the intervals tile the MCU rows
// (an interval is whole rows, or a row is whole intervals), the intervals of
// an MCU rectangle, renumbered and framed by the original headers with the
// frame size changed, are a valid JPEG whose pixels are those of the
// rectangle. docs/restart_intervals.md has the design and its limits.
//
// Free functions over bytes; no state, safe for concurrent use.
#ifndef FEEDLINE_SRC_IMAGE_JPEG_RESTART_H_
#define FEEDLINE_SRC_IMAGE_JPEG_RESTART_H_

#include <cstdint>
#include <span>
#include <vector>

namespace feedline::image {

// Where a JPEG's restart intervals are. Filled by FindRestartIntervals.
struct RestartLayout {
  uint32_t width = 0, height = 0;          // the frame's, in pixels
  uint32_t mcu_width = 0, mcu_height = 0;  // pixels of one MCU at full scale
  uint32_t mcus_x = 0, mcus_y = 0;         // MCUs per row, MCU rows
  uint32_t interval = 0;                   // MCUs per restart interval (DRI)
  // Exactly one of these two is more than 1, or both are 1: an interval is
  // `rows_per_interval` whole MCU rows, or a row is `intervals_per_row`
  // whole intervals.
  uint32_t rows_per_interval = 0, intervals_per_row = 0;
  uint32_t h_samp[4] = {}, v_samp[4] = {};  // per component, as in the frame
  uint32_t components = 0;
  size_t sof_offset = 0;   // the frame header's first byte after its length
  size_t data_offset = 0;  // the first byte of entropy-coded data (after SOS)
  // Interval i is bytes [begin[i], end[i]), marker and fill bytes excluded.
  std::vector<size_t> begin, end;
};

// True if `jpeg` is a single-scan baseline (or extended sequential) Huffman
// JPEG with a restart interval whose markers are all present, numbered in
// order, one every `interval` MCUs up to an end-of-image marker, and whose
// intervals tile the MCU rows. False otherwise (no DRI, progressive,
// arithmetic, several scans, a missing, extra or out-of-order marker, an
// interval that straddles rows...): the caller then decodes the whole file.
// Reuses `layout`'s vectors.
bool FindRestartIntervals(std::span<const uint8_t> jpeg, RestartLayout* layout);

// An MCU rectangle of the image: columns [col0, col1), rows [row0, row1).
struct McuWindow {
  uint32_t col0 = 0, row0 = 0, col1 = 0, row1 = 0;
};

// The smallest window that holds `w` and can be cut from `layout`'s
// intervals (rows widened to whole intervals; columns to whole intervals,
// or to the whole row when an interval is one or more rows).
McuWindow AlignWindow(const RestartLayout& layout, McuWindow w);

// Writes into `out` a JPEG of the window's pixels: the headers of `jpeg`
// (metadata segments APP1..APP13, APP15 and COM left out: the decoder reads
// none of them) with the frame size of the window, the window's intervals
// with their markers renumbered from RST0, and an end-of-image marker.
// `window` must come from AlignWindow. Pixel (x, y) of the result is pixel
// (x + col0 * mcu_width, y + row0 * mcu_height) of the image, and decodes
// to the same values except within one MCU of a window edge that is not an
// image edge (chroma upsampling sees the window's edge there).
void BuildWindowJpeg(std::span<const uint8_t> jpeg, const RestartLayout& layout,
                     const McuWindow& window, std::vector<uint8_t>* out);

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_JPEG_RESTART_H_
