// WHILE conditional nodes in plain CUDA C, built, run, destroyed and their memory freed, over and
// over, from 1 and then 8 threads (one stream, serialised by a mutex), as vyre's loops do: the
// control experiment of docs/resident.md. Under memcheck it runs cleanly alone on a GPU; variants of
// it (recycled memory, a cache of live loop graphs) faulted, like vyre's loops, when three
// sanitized processes shared one H100:
//   nvcc -arch=sm_90 -o /tmp/while_nodes benchmarks/while_nodes.cu && compute-sanitizer --tool memcheck /tmp/while_nodes
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>
#include <cuda_runtime.h>
__global__ void body(const unsigned *params, unsigned *data, unsigned *flag) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < params[1] && data[i] > 0) { data[i] -= 1; *flag = 1; }
}
__global__ void cond(cudaGraphConditionalHandle h, unsigned *flag, unsigned *control) {
  unsigned c = ++control[0]; bool go = *flag != 0 && c < control[1]; if (go) *flag = 0;
  cudaGraphSetConditional(h, go ? 1 : 0);
}
#define CK(x) do { cudaError_t e_ = (x); if (e_) { printf("line %d %s: %s\n", __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)
static cudaStream_t s;
static std::mutex mu;
static int failures = 0;
static void loop_once(unsigned n, unsigned top) {
  std::lock_guard<std::mutex> lock(mu);
  unsigned *params, *data, *flag, *control;
  CK(cudaMalloc(&params, 12)); CK(cudaMalloc(&data, n * 4)); CK(cudaMalloc(&flag, 4)); CK(cudaMalloc(&control, 8));
  unsigned hp[3] = {n, n, 1}; CK(cudaMemcpy(params, hp, 12, cudaMemcpyHostToDevice));
  std::vector<unsigned> hd(n); for (unsigned i = 0; i < n; ++i) hd[i] = i % (top + 1);
  CK(cudaMemcpy(data, hd.data(), n * 4, cudaMemcpyHostToDevice));
  unsigned hc[2] = {0, 1000}; CK(cudaMemcpy(control, hc, 8, cudaMemcpyHostToDevice)); CK(cudaMemset(flag, 0, 4));
  cudaGraph_t g; CK(cudaGraphCreate(&g, 0));
  cudaGraphConditionalHandle h; CK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
  cudaGraphNodeParams p = {}; p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = h; p.conditional.type = cudaGraphCondTypeWhile; p.conditional.size = 1;
  cudaGraphNode_t node; CK(cudaGraphAddNode(&node, g, NULL, NULL, 0, &p));
  cudaGraph_t bodyg = p.conditional.phGraph_out[0];
  CK(cudaStreamBeginCaptureToGraph(s, bodyg, NULL, NULL, 0, cudaStreamCaptureModeRelaxed));
  body<<<(n + 63) / 64, 64, 0, s>>>(params, data, flag); cond<<<1, 1, 0, s>>>(h, flag, control);
  CK(cudaStreamEndCapture(s, &bodyg));
  cudaGraphExec_t ex; CK(cudaGraphInstantiate(&ex, g, 0)); CK(cudaGraphLaunch(ex, s)); CK(cudaStreamSynchronize(s));
  CK(cudaMemcpy(hc, control, 8, cudaMemcpyDeviceToHost));
  if (hc[0] != top + 1) { printf("iterations %u, want %u\n", hc[0], top + 1); ++failures; }
  CK(cudaGraphExecDestroy(ex)); CK(cudaGraphDestroy(g));
  CK(cudaFree(params)); CK(cudaFree(data)); CK(cudaFree(flag)); CK(cudaFree(control));
}
int main() {
  CK(cudaStreamCreate(&s));
  for (unsigned i = 0; i < 12; ++i) loop_once(700 + 97 * i, 3 + i);
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t) ts.emplace_back([t] { for (int k = 0; k < 10; ++k) loop_once(64 + t, 5 + k); });
  for (auto &t : ts) t.join();
  printf("while2: %d failures\n", failures);
  return failures ? 2 : 0;
}
