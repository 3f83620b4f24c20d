// A host emulation of the CUDA features the attention kernels use, so that the kernels of
// backends/cuda/cuda_attention.cu can run on a machine without a GPU (tests/cuda_emulation/run.sh).
//
// A launch runs its blocks one after another; every CUDA thread of a block is a std::thread, so
// __syncthreads is a real barrier and a missing one can show up as a wrong result. Warp shuffles
// go through a per-warp slot array between two barriers. Dynamic shared memory is one buffer,
// filled with 0xFF bytes (NaN in float and double, -1 in integers) before each launch, so a read
// of shared memory that no thread wrote shows up in the results. What this cannot check: the
// GPU memory model, real scheduling, CUDA's math library and speed.
#pragma once
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/error.h"
#include "core/philox.h"
#include "core/tensor.h"

#define __global__
#define __device__
#define __host__
#define __shared__ static  // one block runs at a time: a static is that block's shared memory
#define __align__(n)

namespace emu {

struct Dim3 {
  unsigned x = 0, y = 1, z = 1;
};

// Limits the tests may lower through the environment to force many tiles and few blocks.
inline int64_t env_or(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoll(value) : fallback;
}

inline std::vector<unsigned char> dynamic_shared;
inline std::barrier<>* block_barrier = nullptr;
inline std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
inline std::vector<double> shuffle_slots;  // one per thread (float and double fit exactly)

}  // namespace emu

inline thread_local emu::Dim3 threadIdx, blockIdx;
inline emu::Dim3 blockDim, gridDim;

inline void __syncthreads() { emu::block_barrier->arrive_and_wait(); }

template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int offset) {
  if (mask != 0xffffffffu) std::abort();  // the kernels only shuffle whole warps
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  emu::shuffle_slots[warp * 32 + lane] = static_cast<double>(v);
  emu::warp_barriers[warp]->arrive_and_wait();
  const T result = static_cast<T>(emu::shuffle_slots[warp * 32 + (lane ^ offset)]);
  emu::warp_barriers[warp]->arrive_and_wait();
  return result;
}

namespace emu {

// kernel<<<grid, block>>>(...): runs kernel() for every block, one host thread per CUDA thread.
// The threads are made once per launch and run the blocks one after another, all finishing a
// block before any starts the next (as if each block ran alone, with its own shared memory).
template <typename F>
void launch(unsigned grid, unsigned block, F kernel) {
  if (grid == 0 || block == 0 || block % 32 != 0 || block > 1024) std::abort();
  gridDim.x = grid;
  blockDim.x = block;
  std::barrier<> barrier(block);
  block_barrier = &barrier;
  warp_barriers.clear();
  for (unsigned w = 0; w < block / 32; ++w) warp_barriers.push_back(std::make_unique<std::barrier<>>(32));
  shuffle_slots.assign(block, 0.0);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < block; ++t) {
    threads.emplace_back([&, t] {
      threadIdx.x = t;
      for (unsigned b = 0; b < grid; ++b) {
        blockIdx.x = b;
        kernel();
        barrier.arrive_and_wait();  // the block is done
      }
    });
  }
  for (auto& thread : threads) thread.join();
}

// kernel<<<grid, block, bytes>>>(...): the same with `bytes` of dynamic shared memory.
template <typename F>
void launch(unsigned grid, unsigned block, std::size_t bytes, F kernel) {
  dynamic_shared.assign(bytes, 0xFF);
  launch(grid, block, kernel);
}

}  // namespace emu
