// oneDNN's sgemm behind gpulab's one GEMM entry (see sgemm.h).
#include "train/ops/sgemm.h"

#include <c10/util/Exception.h>

#if defined(GPULAB_HAVE_DNNL) && GPULAB_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace gpulab::train {

bool have_sgemm() {
#if defined(GPULAB_HAVE_DNNL) && GPULAB_HAVE_DNNL
  return true;
#else
  return false;
#endif
}

void sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc) {
#if defined(GPULAB_HAVE_DNNL) && GPULAB_HAVE_DNNL
  const auto status =
      dnnl::sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f, c, ldc);
  TORCH_CHECK(status == dnnl::status::success, "oneDNN sgemm failed (", static_cast<int>(status),
              ") for ", m, "x", n, "x", k);
#else
  TORCH_CHECK(false, "sgemm needs a build with oneDNN (libdnnl-dev)");
#endif
}

}  // namespace gpulab::train
