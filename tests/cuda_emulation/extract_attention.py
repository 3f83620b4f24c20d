"""Turns backends/cuda/cuda_attention.cu into host C++ for the emulation (emu.h).

    python3 extract_attention.py REPO OUT_DIR

Writes OUT_DIR/attention_kernels.h: the helpers of cuda_common.cuh (namespace qkgrad::cuda) and
the kernels of cuda_attention.cu (its anonymous namespace), and OUT_DIR/attention_host.h: its
two CudaBackend methods renamed emu_attention_forward / emu_attention_backward, with every
kernel<<<...>>>(args) launch turned into emu::launch(..., [&] { kernel(args); }) and the device
into the cpu. Any change to the source that this does not recognise stops it with an error.
"""
import os
import re
import sys

repo, out_dir = sys.argv[1], sys.argv[2]


def replace_once(text, old, new):
    if text.count(old) != 1:
        sys.exit(f"extract_attention.py: expected exactly one '{old}' in the source")
    return text.replace(old, new)


src = open(os.path.join(repo, 'backends/cuda/cuda_attention.cu')).read()
host_marker = '}  // namespace\n\nvoid CudaBackend::attention_forward'
kernels = src[src.index('namespace {'):src.index(host_marker) + len('}  // namespace\n')]
kernels = kernels.replace('extern __shared__ __align__(16) unsigned char attn_shared[];',
                          'unsigned char* attn_shared = emu::dynamic_shared.data();')
# The block sizes and the tile and grid limits become environment variables (EMU_TILE_THREADS,
# EMU_ROW_THREADS, EMU_MAX_TILE, EMU_MAX_BLOCKS): the kernels work for any multiple of 32 threads.
kernels = replace_once(kernels, 'constexpr int kTileThreads = 128;',
                       'inline const int kTileThreads = static_cast<int>(emu::env_or("EMU_TILE_THREADS", 128));')
kernels = replace_once(kernels, 'constexpr int kRowThreads = 256;',
                       'inline const int kRowThreads = static_cast<int>(emu::env_or("EMU_ROW_THREADS", 256));')
kernels = replace_once(kernels, 'constexpr int64_t kMaxTile = 32;',
                       'inline const int64_t kMaxTile = emu::env_or("EMU_MAX_TILE", 32);')
kernels = replace_once(kernels, 'constexpr int64_t kMaxBlocks = int64_t{1} << 20;',
                       'inline const int64_t kMaxBlocks = emu::env_or("EMU_MAX_BLOCKS", int64_t{1} << 20);')
kernels = kernels.replace('Device::cuda', 'Device::cpu')

common = open(os.path.join(repo, 'backends/cuda/cuda_common.cuh')).read()
begin = common.index('namespace qkgrad::cuda {') + len('namespace qkgrad::cuda {')
helpers = common[begin:common.rindex('}  // namespace qkgrad::cuda')]

with open(os.path.join(out_dir, 'attention_kernels.h'), 'w') as f:
    f.write('#pragma once\n#include "emu.h"\n#include "backends/dtype_dispatch.h"\n#include "core/row_functions.h"\n'
            'namespace qkgrad::cuda {\n' + helpers + '}\n'
            'namespace qkgrad {\n' + kernels + '}  // namespace qkgrad\n')

host = src[src.index(host_marker) + len('}  // namespace\n'):src.rindex('}  // namespace qkgrad')]
host = replace_once(host, 'void CudaBackend::attention_forward', 'void emu_attention_forward')
host = replace_once(host, 'void CudaBackend::attention_backward', 'void emu_attention_backward')
host = host.replace('Device::cuda', 'Device::cpu').replace('QKGRAD_CUDA_LAUNCHED();', '')
host, launches = re.subn(r'(\w+<T>)<<<(.*?)>>>\((.*?)\);', r'emu::launch(\2, [&] { \1(\3); });',
                         host, flags=re.S)
if launches < 8 or '<<<' in host:
    sys.exit(f'extract_attention.py: converted {launches} launches, and some are left')
with open(os.path.join(out_dir, 'attention_host.h'), 'w') as f:
    f.write('#pragma once\n#include "attention_kernels.h"\nnamespace qkgrad {\n'
            + host + '}  // namespace qkgrad\n')
print(f'extract_attention.py: {launches} kernel launches converted')
