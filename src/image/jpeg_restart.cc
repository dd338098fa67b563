#include "src/image/jpeg_restart.h"

#include <algorithm>
#include <cstring>

namespace feedline::image {
namespace {

uint32_t Be16(std::span<const uint8_t> b, size_t i) { return uint32_t{b[i]} << 8 | b[i + 1]; }

// Moves `i` past the next marker's 0xFF (and any fill bytes); false at the end.
bool NextMarker(std::span<const uint8_t> b, size_t* i) {
  while (*i < b.size() && b[*i] != 0xFF) ++*i;
  while (*i < b.size() && b[*i] == 0xFF) ++*i;
  return *i < b.size();
}

bool IsStandalone(uint8_t m) { return (m >= 0xD0 && m <= 0xD8) || m == 0x01; }

// Metadata segments the decoder never reads (libjpeg saves none unless
// asked): EXIF, XMP, ICC, thumbnails, comments. JFIF (APP0) and Adobe
// (APP14) are kept: they decide the colour space.
bool IsDroppable(uint8_t m) { return (m >= 0xE1 && m <= 0xED) || m == 0xEF || m == 0xFE; }

}  // namespace

bool FindRestartIntervals(std::span<const uint8_t> b, RestartLayout* l) {
  l->begin.clear();
  l->end.clear();
  l->interval = 0;
  l->sof_offset = 0;
  if (b.size() < 4 || b[0] != 0xFF || b[1] != 0xD8) return false;
  size_t i = 2;
  uint32_t dri = 0;
  bool have_sof = false;
  // Header segments up to the first scan.
  while (true) {
    if (!NextMarker(b, &i)) return false;
    const uint8_t m = b[i++];
    if (m == 0x00 || IsStandalone(m)) continue;
    if (m == 0xD9) return false;
    if (i + 2 > b.size()) return false;
    const size_t len = Be16(b, i);
    if (len < 2 || i + len > b.size()) return false;
    if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
      // Only baseline and extended sequential Huffman: one frame.
      if ((m != 0xC0 && m != 0xC1) || have_sof || len < 8) return false;
      if (b[i + 2] != 8) return false;
      l->height = Be16(b, i + 3);
      l->width = Be16(b, i + 5);
      l->components = b[i + 7];
      if (l->width == 0 || l->height == 0 || l->components == 0 || l->components > 4 ||
          len != 8 + 3 * size_t{l->components}) {
        return false;
      }
      uint32_t hmax = 0, vmax = 0;
      for (uint32_t c = 0; c < l->components; ++c) {
        const uint8_t s = b[i + 9 + size_t{3} * c];
        l->h_samp[c] = s >> 4;
        l->v_samp[c] = s & 15;
        if (l->h_samp[c] < 1 || l->h_samp[c] > 4 || l->v_samp[c] < 1 || l->v_samp[c] > 4)
          return false;
        hmax = std::max(hmax, l->h_samp[c]);
        vmax = std::max(vmax, l->v_samp[c]);
      }
      // One component is coded non-interleaved: an MCU is one 8x8 block.
      // Declared sampling factors other than 1x1 change libjpeg's iMCU
      // height for it; leave such rare files to the whole-file path.
      if (l->components == 1 && (hmax != 1 || vmax != 1)) return false;
      l->mcu_width = 8 * hmax;
      l->mcu_height = 8 * vmax;
      l->sof_offset = i + 2;
      have_sof = true;
    } else if (m == 0xDD) {
      if (len != 4) return false;
      dri = Be16(b, i + 2);
    } else if (m == 0xDA) {
      // One scan carrying every component: anything else is multi-scan.
      if (!have_sof || len < 3 || b[i + 2] != l->components) return false;
      i += len;
      break;
    }
    i += len;
  }
  if (dri == 0) return false;
  l->interval = dri;
  l->data_offset = i;
  l->mcus_x = (l->width + l->mcu_width - 1) / l->mcu_width;
  l->mcus_y = (l->height + l->mcu_height - 1) / l->mcu_height;
  if (dri % l->mcus_x == 0) {
    l->rows_per_interval = dri / l->mcus_x;
    l->intervals_per_row = 1;
  } else if (l->mcus_x % dri == 0) {
    l->rows_per_interval = 1;
    l->intervals_per_row = l->mcus_x / dri;
  } else {
    return false;  // intervals straddle rows at varying columns
  }
  const uint64_t total = uint64_t{l->mcus_x} * l->mcus_y;
  const uint64_t expected = (total + dri - 1) / dri;
  l->begin.reserve(expected);
  l->end.reserve(expected);
  l->begin.push_back(i);
  // Entropy-coded data: 0xFF is followed by 0x00 (a stuffed byte), fill
  // bytes or a marker. RSTn must come in order, n = count mod 8; the first
  // other marker must be EOI after exactly `expected` intervals.
  while (true) {
    const void* ff = i < b.size() ? std::memchr(b.data() + i, 0xFF, b.size() - i) : nullptr;
    if (ff == nullptr) return false;
    const size_t at = static_cast<size_t>(static_cast<const uint8_t*>(ff) - b.data());
    size_t j = at + 1;
    while (j < b.size() && b[j] == 0xFF) ++j;
    if (j >= b.size()) return false;
    const uint8_t m = b[j];
    if (m == 0x00) {
      i = j + 1;
      continue;
    }
    if (m >= 0xD0 && m <= 0xD7) {
      if (size_t{m} - 0xD0 != (l->begin.size() - 1) % 8 || l->begin.size() >= expected)
        return false;
      l->end.push_back(at);
      l->begin.push_back(j + 1);
      i = j + 1;
      continue;
    }
    if (m != 0xD9 || l->begin.size() != expected) return false;
    l->end.push_back(at);
    return true;
  }
}

McuWindow AlignWindow(const RestartLayout& l, McuWindow w) {
  const uint32_t k = l.rows_per_interval;
  w.row0 = w.row0 / k * k;
  w.row1 = std::min(l.mcus_y, (w.row1 + k - 1) / k * k);
  if (l.intervals_per_row > 1) {
    const uint32_t n = l.interval;
    w.col0 = w.col0 / n * n;
    w.col1 = std::min(l.mcus_x, (w.col1 + n - 1) / n * n);
  } else {
    w.col0 = 0;
    w.col1 = l.mcus_x;
  }
  return w;
}

void BuildWindowJpeg(std::span<const uint8_t> b, const RestartLayout& l, const McuWindow& w,
                     std::vector<uint8_t>* out) {
  out->clear();
  out->push_back(0xFF);
  out->push_back(0xD8);
  // Header segments, walked as FindRestartIntervals did (it accepted them).
  size_t i = 2;
  size_t sof_in_out = 0;
  while (i < l.data_offset) {
    const size_t start = i;
    NextMarker(b, &i);
    const uint8_t m = b[i++];
    if (m == 0x00 || IsStandalone(m)) continue;
    const size_t len = Be16(b, i);
    const size_t seg_end = i + len;
    if (!IsDroppable(m)) {
      if (i + 2 == l.sof_offset) sof_in_out = out->size() + (l.sof_offset - start);
      out->insert(out->end(), b.begin() + static_cast<ptrdiff_t>(start),
                  b.begin() + static_cast<ptrdiff_t>(seg_end));
    }
    i = seg_end;
  }
  const uint32_t height = std::min(l.height, w.row1 * l.mcu_height) - w.row0 * l.mcu_height;
  const uint32_t width = std::min(l.width, w.col1 * l.mcu_width) - w.col0 * l.mcu_width;
  (*out)[sof_in_out + 1] = static_cast<uint8_t>(height >> 8);
  (*out)[sof_in_out + 2] = static_cast<uint8_t>(height);
  (*out)[sof_in_out + 3] = static_cast<uint8_t>(width >> 8);
  (*out)[sof_in_out + 4] = static_cast<uint8_t>(width);
  uint32_t count = 0;
  auto append = [&](size_t interval) {
    if (count > 0) {
      out->push_back(0xFF);
      out->push_back(static_cast<uint8_t>(0xD0 + (count - 1) % 8));
    }
    out->insert(out->end(), b.begin() + static_cast<ptrdiff_t>(l.begin[interval]),
                b.begin() + static_cast<ptrdiff_t>(l.end[interval]));
    ++count;
  };
  if (l.intervals_per_row > 1) {
    for (uint32_t r = w.row0; r < w.row1; ++r) {
      for (uint32_t c = w.col0; c < w.col1; c += l.interval) {
        append(size_t{r} * l.intervals_per_row + c / l.interval);
      }
    }
  } else {
    for (uint32_t r = w.row0; r < w.row1; r += l.rows_per_interval) append(r / l.rows_per_interval);
  }
  out->push_back(0xFF);
  out->push_back(0xD9);
}

}  // namespace feedline::image
