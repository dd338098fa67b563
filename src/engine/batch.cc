#include "feedline/batch.h"

#include "src/core/check.h"
#include "src/engine/detail/batch_data.h"

namespace feedline {

namespace detail {

BatchLayout BatchLayout::Make(uint64_t batch_size, std::vector<FieldSpec> fields) {
  BatchLayout layout;
  layout.batch_size = batch_size;
  size_t offset = 0;
  for (const FieldSpec& f : fields) {
    layout.bytes_index.push_back(
        f.kind == FieldKind::kBytes ? static_cast<int>(layout.num_bytes_fields++) : -1);
    const size_t bytes = f.SampleBytes();
    layout.sample_bytes.push_back(bytes);
    layout.offsets.push_back(offset);
    offset += (bytes * batch_size + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  }
  // A layout of kBytes fields only still gets a (minimal) buffer: the ring
  // counts batches in buffers.
  layout.total_bytes = offset == 0 ? kBufferAlignment : offset;
  layout.fields = std::move(fields);
  return layout;
}

}  // namespace detail

std::string SampleError::Reason() const {
  std::string r = op;
  r += '/';
  r += StatusCodeName(status.code());
  return r;
}

std::string SampleError::ToString() const {
  std::string s = "sample " + std::to_string(sample_id) + " (epoch " + std::to_string(epoch) +
                  ", batch " + std::to_string(batch);
  const std::string where = location.ToString();
  if (!where.empty()) s += ", " + where;
  s += ") in op '" + op + "': " + status.ToString();
  return s;
}

uint64_t Batch::epoch() const { return d_ ? d_->epoch : 0; }
uint64_t Batch::index() const { return d_ ? d_->index : 0; }
size_t Batch::size() const { return d_ ? d_->ids.size() : 0; }
std::span<const uint64_t> Batch::sample_ids() const {
  return d_ ? std::span<const uint64_t>(d_->ids) : std::span<const uint64_t>();
}
size_t Batch::num_padding() const { return d_ ? d_->num_padding : 0; }
std::span<const SampleError> Batch::skipped() const {
  return d_ ? std::span<const SampleError>(d_->skipped) : std::span<const SampleError>();
}
size_t Batch::num_fields() const { return d_ ? d_->layout->fields.size() : 0; }

const FieldSpec& Batch::field(size_t i) const {
  FEEDLINE_CHECK(d_ != nullptr && i < d_->layout->fields.size());
  return d_->layout->fields[i];
}

void* Batch::data(size_t i) const {
  FEEDLINE_CHECK(d_ != nullptr && i < d_->layout->fields.size());
  return static_cast<char*>(d_->buffer->data()) + d_->layout->offsets[i];
}

size_t Batch::field_bytes(size_t i) const {
  FEEDLINE_CHECK(d_ != nullptr && i < d_->layout->fields.size());
  return d_->ids.size() * d_->layout->sample_bytes[i];
}

std::span<const uint8_t> Batch::bytes(size_t i, size_t sample) const {
  FEEDLINE_CHECK(d_ != nullptr && i < d_->layout->fields.size() && sample < d_->ids.size());
  const int j = d_->layout->bytes_index[i];
  FEEDLINE_CHECK(j >= 0 && d_->bytes != nullptr);
  return d_->bytes->values[static_cast<size_t>(j)][sample];
}

std::shared_ptr<void> Batch::keepalive() const {
  if (!d_) return nullptr;
  return std::shared_ptr<void>(d_, d_->buffer->data());
}

std::span<std::byte> Batch::buffer() const {
  if (!d_) return {};
  return {static_cast<std::byte*>(d_->buffer->data()), d_->buffer->size()};
}

}  // namespace feedline
