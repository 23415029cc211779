"""The disk cache never trusts its files: an entry is checked (magic, key, sizes, checksum of the
executable bytes) before it is deserialized; a damaged entry is recompiled, counted and
rewritten, and the result is right."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

import torch_tpu
from torch_tpu import _C

# One fresh process per run: the memory cache is empty, so the op must come from the disk cache
# (or be recompiled). It prints its value and the cache counters.
SCRIPT = textwrap.dedent("""
    import torch, torch_tpu
    x = torch.arange(7, dtype=torch.float32, device="tpu")
    print(((x * 3 + 1).sum()).item())
    s = torch_tpu._C._cache_stats()
    print(s["compiles"], s["disk_hits"], s["disk_corrupt"])
""")
EXPECTED = float((torch.arange(7.0) * 3 + 1).sum())


def _run(env):
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    value, stats = out.stdout.strip().splitlines()[-2:]
    return float(value), tuple(map(int, stats.split()))


def _entries(cache):
    return sorted((cache / "executables").glob("*.bin"))


def test_every_damaged_entry_is_recompiled_never_trusted(tmp_path):
    cache = tmp_path / "cache"
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(cache), TORCH_TPU_QUIET="1")
    env.pop("TORCH_TPU_AOT_CHECK", None)
    value, (compiles, hits, corrupt) = _run(env)
    assert value == EXPECTED and compiles > 0 and hits == 0 and corrupt == 0
    entries = _entries(cache)
    assert len(entries) == compiles
    originals = {p: p.read_bytes() for p in entries}

    # Damage every entry at once, each at a different place: header, key, sizes, payload, end.
    for n, (path, data) in enumerate(originals.items()):
        where = [0, 9, 20, len(data) // 2, len(data) - 1][n % 5]
        damaged = bytearray(data)
        damaged[where] ^= 0x5A
        path.write_bytes(bytes(damaged))
    value, (compiles2, hits2, corrupt2) = _run(env)
    assert value == EXPECTED
    assert corrupt2 == len(entries) and hits2 == 0 and compiles2 == compiles

    # The entries were rewritten: a third process reads them all from disk.
    value, (compiles3, hits3, corrupt3) = _run(env)
    assert value == EXPECTED and compiles3 == 0 and hits3 == compiles and corrupt3 == 0

    # A truncated entry and an empty one are damaged entries too.
    entries = _entries(cache)
    entries[0].write_bytes(entries[0].read_bytes()[:-100])
    if len(entries) > 1:
        entries[1].write_bytes(b"")
    value, (_, _, corrupt4) = _run(env)
    assert value == EXPECTED and corrupt4 == min(2, len(entries))


def test_single_byte_flips_anywhere_are_detected(tmp_path):
    """Every byte of the header and key, and a spread of payload bytes: each flip is refused by
    the same check the engine makes before deserializing (FNV-1a detects any one-byte change)."""
    cache = tmp_path / "cache"
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(cache), TORCH_TPU_QUIET="1")
    env.pop("TORCH_TPU_AOT_CHECK", None)
    _run(env)
    path = _entries(cache)[0]
    data = path.read_bytes()
    key_size = int.from_bytes(data[8:16], "little")
    key = data[16:16 + key_size]
    assert _C._cache_entry_valid(str(path), key)
    header_and_key = range(0, 16 + key_size + 16)
    payload = range(16 + key_size + 16, len(data), max(1, (len(data) - key_size) // 300))
    flipped = tmp_path / "flipped.bin"
    for where in [*header_and_key, *payload, len(data) - 1]:
        for bit in (0x01, 0x80):
            damaged = bytearray(data)
            damaged[where] ^= bit
            flipped.write_bytes(bytes(damaged))
            assert not _C._cache_entry_valid(str(flipped), key), f"flip of bit {bit:#x} at byte {where} not detected"
