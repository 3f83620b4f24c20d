"""Turns CUDA kernel files of backends/cuda/ into host C++ for the emulation (emu.h).

    python3 extract_kernels.py REPO OUT_DIR

Writes OUT_DIR/cuda_common.h: the helpers of cuda_common.cuh (namespace qkgrad::cuda); and for
each of cuda_attention.cu and cuda_norm.cu, in namespace qkgrad::emu_NAME, OUT_DIR/NAME_kernels.h
(the file's anonymous namespace: its kernels) and OUT_DIR/NAME_host.h (its CudaBackend methods
renamed emu_METHOD,
with every kernel<<<...>>>(args) launch turned into emu::launch(..., [&] { kernel(args); }) and
the device into the cpu). Any change to the sources that this does not recognise stops it with
an error.
"""
import os
import re
import sys

repo, out_dir = sys.argv[1], sys.argv[2]
HOST_MARKER = '}  // namespace\n\nvoid CudaBackend::'


def replace_once(text, old, new, where):
    if text.count(old) != 1:
        sys.exit(f"extract_kernels.py: expected exactly one '{old}' in {where}")
    return text.replace(old, new)


def read(path):
    return open(os.path.join(repo, path)).read()


def write(name, text):
    with open(os.path.join(out_dir, name), 'w') as f:
        f.write(text)


# The helpers. The block sizes and grid limits become environment variables (the kernels must
# work for any multiple of 32 threads and any grid): EMU_ELEMENT_THREADS for the grid-stride
# kernels, EMU_MAX_ROW_THREADS caps threads_for_row, EMU_MAX_BLOCKS caps every grid.
common = read('backends/cuda/cuda_common.cuh')
begin = common.index('namespace qkgrad::cuda {') + len('namespace qkgrad::cuda {')
helpers = common[begin:common.rindex('}  // namespace qkgrad::cuda')]
where = 'cuda_common.cuh'
helpers = replace_once(helpers, 'constexpr int kThreads = 256;',
                       'inline const int kThreads = static_cast<int>(emu::env_or("EMU_ELEMENT_THREADS", 256));', where)
helpers = replace_once(helpers, 'constexpr int64_t kMaxBlocks = 65535;',
                       'inline const int64_t kMaxBlocks = emu::env_or("EMU_MAX_BLOCKS", 65535);', where)
helpers = replace_once(helpers, 'while (t < 1024 && t < n) t *= 2;',
                       'while (t < 1024 && t < emu::env_or("EMU_MAX_ROW_THREADS", 1024) && t < n) t *= 2;', where)
write('cuda_common.h', '#pragma once\n#include "emu.h"\n#include "backends/dtype_dispatch.h"\n'
      '#include "core/row_functions.h"\nnamespace qkgrad::cuda {\n' + helpers + '}  // namespace qkgrad::cuda\n')


def extract(name, kernel_edits, min_launches):
    """Writes NAME_kernels.h and NAME_host.h from backends/cuda/cuda_NAME.cu."""
    where = f'cuda_{name}.cu'
    src = read(f'backends/cuda/{where}')
    kernels = src[src.index('namespace {'):src.index(HOST_MARKER) + len('}  // namespace\n')]
    for old, new in kernel_edits:
        kernels = replace_once(kernels, old, new, where) if old.startswith('constexpr') else kernels.replace(old, new)
    kernels = kernels.replace('Device::cuda', 'Device::cpu')
    space = f'qkgrad::emu_{name}'  # one namespace per file: a driver may include several
    write(f'{name}_kernels.h', '#pragma once\n#include "cuda_common.h"\n'
          f'namespace {space} {{\n' + kernels + f'}}  // namespace {space}\n')

    host = src[src.index(HOST_MARKER) + len('}  // namespace\n'):src.rindex('}  // namespace qkgrad')]
    host = host.replace('void CudaBackend::', 'void emu_')
    if 'CudaBackend::' in host:
        sys.exit(f'extract_kernels.py: {where} has a CudaBackend member this does not convert')
    host = host.replace('Device::cuda', 'Device::cpu').replace('QKGRAD_CUDA_LAUNCHED();', '')
    host, launches = re.subn(r'(\w+<T>)<<<(.*?)>>>\((.*?)\);', r'emu::launch(\2, [&] { \1(\3); });',
                             host, flags=re.S)
    if launches < min_launches or '<<<' in host:
        sys.exit(f'extract_kernels.py: {where}: converted {launches} launches, and some are left')
    write(f'{name}_host.h', f'#pragma once\n#include "{name}_kernels.h"\nnamespace {space} {{\n'
          + host + f'}}  // namespace {space}\n')
    print(f'extract_kernels.py: {where}: {launches} kernel launches converted')


# The attention kernels' own block sizes and limits (EMU_TILE_THREADS, EMU_ROW_THREADS,
# EMU_MAX_TILE, EMU_MAX_BLOCKS), each defined once; dynamic shared memory (declared in each
# kernel that uses it) is emu.h's buffer.
extract('attention', [
    ('extern __shared__ __align__(16) unsigned char attn_shared[];',
     'unsigned char* attn_shared = emu::dynamic_shared.data();'),
    ('constexpr int kTileThreads = 128;',
     'inline const int kTileThreads = static_cast<int>(emu::env_or("EMU_TILE_THREADS", 128));'),
    ('constexpr int kRowThreads = 256;',
     'inline const int kRowThreads = static_cast<int>(emu::env_or("EMU_ROW_THREADS", 256));'),
    ('constexpr int64_t kMaxTile = 32;', 'inline const int64_t kMaxTile = emu::env_or("EMU_MAX_TILE", 32);'),
    ('constexpr int64_t kMaxBlocks = int64_t{1} << 20;',
     'inline const int64_t kMaxBlocks = emu::env_or("EMU_MAX_BLOCKS", int64_t{1} << 20);'),
], min_launches=8)
extract('norm', [], min_launches=12)
