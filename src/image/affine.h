// The geometric pixel ops (RandomRotation, RandomAffine) and the policies
// (TrivialAugmentWide, RandAugment, AutoAugment, AugMix) on a planar 8-bit
// RGB image: parameter checks, torchvision's draws, and the affine warp
// kernel. (AugMix's blend of its chains runs in color_ops.cc's pipeline.)
//
// The warp follows torchvision's tensor path (transforms.v2.functional
// affine_image / rotate_image on uint8, expand=False): the inverse matrix of
// _get_inverse_affine_matrix in double, then in float32 as torch computes
// it: the output pixel centres relative to the image centre, the matrix
// scaled to grid_sample's [-1, 1] coordinates, grid_sample(align_corners=
// False, padding "zeros") with NEAREST (round half to even) or BILINEAR
// weights, the fill blended through the in-bounds weight (the "mask"
// channel), rounded half to even. rotate keeps rotate_image's exact paths
// (0 and 180 degrees; 90 and 270 on square images). docs/augmentations.md
// gives the measured differences to torchvision and to its PIL path.
//
// A scalar reference implementation. Thread safety: none needed.
#ifndef FEEDLINE_SRC_IMAGE_AFFINE_H_
#define FEEDLINE_SRC_IMAGE_AFFINE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "feedline/image.h"
#include "feedline/random.h"
#include "feedline/status.h"

namespace feedline::image {

// True for the kinds this file handles (kRotation, kAffine, the policies).
bool IsGeometricPixelOp(PixelOpKind kind);

// OK, or the reason `op` (one of those kinds) is refused, naming the
// parameter (without the "pixel op i (Name): " prefix).
Status CheckGeometricPixelOp(const PixelOp& op);

// Appends the steps `op` becomes for one sample, drawing from `rng` as
// torchvision's get_params / forward draw.
void DrawGeometricPixelOp(const PixelOp& op, SampleRng& rng, std::vector<PixelStep>* steps);

// torchvision's _get_inverse_affine_matrix (inverted=True) in double:
// output -> input coordinates, both relative to `center`.
std::array<double, 6> InverseAffineMatrix(double center_x, double center_y, double angle,
                                          double translate_x, double translate_y, double scale,
                                          double shear_x, double shear_y);

// torch.linspace(start, end, steps)[index] as torch computes it in float32.
float LinspaceF32(double start, double end, uint32_t steps, uint32_t index);

// Applies a kAffine step to `chw` (3 planes of width * height) in place;
// `scratch` holds a copy of the source. The warp runs in the SIMD kernel
// (affine_hwy.h); `reference` runs the scalar reference instead, pixel by
// pixel (the same bytes: tests/image/affine_test.cc).
void ApplyAffineStep(const PixelStep& step, uint32_t width, uint32_t height, uint8_t* chw,
                     std::vector<uint8_t>* scratch, bool reference = false);

}  // namespace feedline::image

#endif  // FEEDLINE_SRC_IMAGE_AFFINE_H_
