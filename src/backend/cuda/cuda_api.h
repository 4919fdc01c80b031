#pragma once
// The NVIDIA libraries behind the CUDA backend. The CUDA runtime is linked statically: it loads
// the driver itself and reports a missing one as an error code, so the binary starts anywhere.
// cuDNN and cuBLASLt are loaded at run time (dlopen) into tables of function pointers, so the
// binary needs neither to start and only pays for loading them on a machine with a GPU. Every
// call goes through check(), which turns a failure into a tandem::Error naming the call.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

namespace tandem::cuda {

void check(cudaError_t status, const char* call);
void check(cudnnStatus_t status, const char* call);
void check(cublasStatus_t status, const char* call);

// The cuDNN functions the backend calls (the legacy API, which cuDNN 9 keeps: descriptor-based
// convolution with algorithm search, and the fused batch-normalisation training calls).
#define TANDEM_CUDNN_FUNCTIONS(X)                             \
  X(cudnnGetVersion)                                          \
  X(cudnnGetErrorString)                                      \
  X(cudnnCreate)                                              \
  X(cudnnDestroy)                                             \
  X(cudnnSetStream)                                           \
  X(cudnnCreateTensorDescriptor)                              \
  X(cudnnDestroyTensorDescriptor)                             \
  X(cudnnSetTensor4dDescriptor)                               \
  X(cudnnCreateFilterDescriptor)                              \
  X(cudnnDestroyFilterDescriptor)                             \
  X(cudnnSetFilter4dDescriptor)                               \
  X(cudnnCreateConvolutionDescriptor)                         \
  X(cudnnDestroyConvolutionDescriptor)                        \
  X(cudnnSetConvolution2dDescriptor)                          \
  X(cudnnSetConvolutionMathType)                              \
  X(cudnnGetConvolutionForwardAlgorithmMaxCount)              \
  X(cudnnGetConvolutionBackwardDataAlgorithmMaxCount)         \
  X(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount)       \
  X(cudnnFindConvolutionForwardAlgorithmEx)                   \
  X(cudnnFindConvolutionBackwardDataAlgorithmEx)              \
  X(cudnnFindConvolutionBackwardFilterAlgorithmEx)            \
  X(cudnnConvolutionForward)                                  \
  X(cudnnConvolutionBackwardData)                             \
  X(cudnnConvolutionBackwardFilter)                           \
  X(cudnnCreateActivationDescriptor)                          \
  X(cudnnDestroyActivationDescriptor)                         \
  X(cudnnSetActivationDescriptor)                             \
  X(cudnnDeriveBNTensorDescriptor)                            \
  X(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize) \
  X(cudnnGetBatchNormalizationBackwardExWorkspaceSize)        \
  X(cudnnGetBatchNormalizationTrainingExReserveSpaceSize)     \
  X(cudnnBatchNormalizationForwardTrainingEx)                 \
  X(cudnnBatchNormalizationBackwardEx)

#define TANDEM_CUBLASLT_FUNCTIONS(X)      \
  X(cublasLtGetVersion)                   \
  X(cublasLtGetStatusString)              \
  X(cublasLtCreate)                       \
  X(cublasLtDestroy)                      \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)          \
  X(cublasLtMatrixLayoutSetAttribute)     \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmul)

#define TANDEM_DECLARE_FUNCTION(name) decltype(&::name) name = nullptr;

struct CudnnLibrary {
  TANDEM_CUDNN_FUNCTIONS(TANDEM_DECLARE_FUNCTION)
};

struct CublasLtLibrary {
  TANDEM_CUBLASLT_FUNCTIONS(TANDEM_DECLARE_FUNCTION)
};

#undef TANDEM_DECLARE_FUNCTION

// Loads cuDNN and cuBLASLt (once); returns "" or why one could not be loaded.
std::string load_libraries();
// The loaded tables; only valid after load_libraries() returned "".
const CudnnLibrary& cudnn();
const CublasLtLibrary& cublaslt();

}  // namespace tandem::cuda
