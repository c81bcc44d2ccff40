"""The output reuse cache: released outputs of 32 MiB and more are kept
(lazily freed) for the next allocation of the same size, up to a limit."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import pylayout as pl

MIB = 1 << 20


@pytest.fixture
def cache():
    before = pl.cache_info()["limit"]
    pl.set_cache_limit(512 * MIB)
    yield
    pl.set_cache_limit(0)
    assert pl.cache_info()["held"] == 0
    pl.set_cache_limit(before)


def test_info_and_limit_roundtrip(cache):
    assert pl.cache_info() == {"limit": 512 * MIB, "held": 0}
    pl.set_cache_limit(3 * MIB)
    assert pl.cache_info()["limit"] == 3 * MIB
    with pytest.raises(ValueError, match=">= 0"):
        pl.set_cache_limit(-1)
    assert pl.cache_info()["limit"] == 3 * MIB
    for bad in ("1", 1.5, None):
        with pytest.raises(TypeError):
            pl.set_cache_limit(bad)


def test_released_output_is_reused_and_results_stay_right(cache, torch):
    x = torch.randn(8, 64, 160, 128)  # 40 MiB
    y = pl.contiguous(x, torch.channels_last)
    assert torch.equal(y, x) and y.is_contiguous(memory_format=torch.channels_last)
    assert pl.cache_info()["held"] == 0
    del y  # torch calls pylayout's deleter: the block goes to the cache
    assert pl.cache_info()["held"] == 40 * MIB
    x2 = torch.randn(8, 64, 160, 128)
    y2 = pl.contiguous(x2, torch.channels_last)  # takes the block
    assert pl.cache_info()["held"] == 0
    assert torch.equal(y2, x2)
    # a live output is never handed out again: a second one gets other memory
    y3 = pl.contiguous(x, torch.channels_last)
    assert y3.data_ptr() != y2.data_ptr()
    assert torch.equal(y2, x2) and torch.equal(y3, x)
    del y2, y3
    assert pl.cache_info()["held"] == 80 * MIB


def test_small_outputs_and_zero_limit_keep_nothing(cache, np):
    a = np.ones((1024, 1024), np.float32).T  # 4 MiB: malloc's, not cached
    b = pl.contiguous(a)
    assert np.array_equal(b, a)
    del b
    assert pl.cache_info()["held"] == 0
    pl.set_cache_limit(0)
    big = np.ones((4096, 2560), np.float32).T  # 40 MiB
    c = pl.contiguous(big)
    assert np.array_equal(c, big)
    del c
    assert pl.cache_info()["held"] == 0


def test_limit_from_environment():
    code = "import pylayout as pl; print(pl.cache_info()['limit'])"
    for value, want in (("12345", 12345), ("0", 0), ("junk", None), ("-5", None)):
        env = dict(os.environ, PYLAYOUT_CACHE_LIMIT=value)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        got = int(out.stdout)
        if want is None:  # unparsable: the default stays
            default = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                     env={k: v for k, v in os.environ.items() if k != "PYLAYOUT_CACHE_LIMIT"})
            assert got == int(default.stdout)
        else:
            assert got == want
